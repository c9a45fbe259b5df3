// sdk_interop.mjs: the official AWS SDK for JavaScript (@aws-sdk/client-s3,
// pinned in package-lock.json) on objects ci wrote, and writing one for ci
// to read back (tests/integration/test_blobstore.py).
//
//   node sdk_interop.mjs ENDPOINT BUCKET list PREFIX       -> JSON [{key,size}]
//   node sdk_interop.mjs ENDPOINT BUCKET get KEY OUTFILE    -> JSON {size}
//   node sdk_interop.mjs ENDPOINT BUCKET put KEY INFILE     -> JSON {etag}
//
// Credentials from AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY; path-style.
import { S3Client, ListObjectsV2Command, GetObjectCommand, PutObjectCommand } from "@aws-sdk/client-s3";
import { createReadStream, createWriteStream, statSync } from "node:fs";
import { pipeline } from "node:stream/promises";

const [endpoint, bucket, cmd, a, b] = process.argv.slice(2);
const s3 = new S3Client({
  endpoint,
  region: "us-east-1",
  forcePathStyle: true,
  credentials: {
    accessKeyId: process.env.AWS_ACCESS_KEY_ID,
    secretAccessKey: process.env.AWS_SECRET_ACCESS_KEY,
  },
});

if (cmd === "list") {
  const out = [];
  let token;
  do {
    const r = await s3.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: a, ContinuationToken: token, MaxKeys: 2 }));
    for (const o of r.Contents ?? []) out.push({ key: o.Key, size: o.Size });
    token = r.IsTruncated ? r.NextContinuationToken : undefined;
  } while (token);
  console.log(JSON.stringify(out));
} else if (cmd === "get") {
  const r = await s3.send(new GetObjectCommand({ Bucket: bucket, Key: a }));
  await pipeline(r.Body, createWriteStream(b));
  console.log(JSON.stringify({ size: statSync(b).size }));
} else if (cmd === "put") {
  const r = await s3.send(new PutObjectCommand({
    Bucket: bucket, Key: a, Body: createReadStream(b), ContentLength: statSync(b).size,
  }));
  console.log(JSON.stringify({ etag: r.ETag }));
} else {
  console.error("usage: sdk_interop.mjs ENDPOINT BUCKET list|get|put ...");
  process.exit(2);
}
