// validate.mjs: every document of every YAML file under a directory (default
// deploy/k8s), offline, against the Kubernetes schemas of the pinned
// kubernetes-models (by apiVersion and kind), and every kustomization.yaml's
// references resolving to files or directories that exist.
//
//   node tests/k8s/validate.mjs [DIR...]     (or FILE...; "-" reads stdin)
//
// Prints one line per problem and a closing "N passed, N failed" (one per
// document and per kustomization); exits 1 on any failure.
//
// The schemas check types, required fields and formats; they do not reject
// unknown fields (kubernetes-models' schemas allow additional properties),
// so a misspelt field is caught only where the schema requires the right one.
// Kinds that kubernetes-models does not know (a CRD) are failures, not skips:
// deploy/k8s uses only built-in kinds.
import fs from "node:fs";
import path from "node:path";
import { parseAllDocuments } from "yaml";

const KUSTOMIZE_REFS = ["resources", "components", "crds", "configurations", "transformers",
  "generators", "validators"];

// "apps/v1" Deployment -> kubernetes-models/apps/v1/Deployment; "v1" Pod ->
// kubernetes-models/v1/Pod. One module per kind: importing the whole package
// costs seconds.
async function modelFor(apiVersion, kind) {
  if (!/^([a-z0-9.-]+\/)?v[0-9a-z]+$/.test(apiVersion) || !/^[A-Z][A-Za-z0-9]*$/.test(kind))
    return undefined;
  try {
    const mod = await import(`kubernetes-models/${apiVersion}/${kind}`);
    return mod[kind];
  } catch (e) {
    if (e.code === "ERR_PACKAGE_PATH_NOT_EXPORTED" || e.code === "ERR_MODULE_NOT_FOUND")
      return undefined;
    throw e;
  }
}

function yamlFiles(p) {
  const st = fs.statSync(p);
  if (!st.isDirectory()) return [p];
  return fs.readdirSync(p).sort().flatMap((n) => yamlFiles(path.join(p, n)))
    .filter((f) => /\.ya?ml$/.test(f));
}

function checkKustomization(file, doc, fail) {
  const dir = path.dirname(file);
  let problems = 0;
  const ref = (what, p) => {
    if (typeof p !== "string" || /^[a-z]+:\/\//.test(p) || p.startsWith("github.com/")) {
      fail(`${file}: ${what} ${JSON.stringify(p)}: only local files (offline, pinned)`);
      problems++;
      return;
    }
    const full = path.resolve(dir, p);
    if (!fs.existsSync(full)) {
      fail(`${file}: ${what} ${p} does not exist`);
      problems++;
    } else if (fs.statSync(full).isDirectory() && !["kustomization.yaml", "kustomization.yml",
      "Kustomization"].some((k) => fs.existsSync(path.join(full, k)))) {
      fail(`${file}: ${what} ${p} is a directory without a kustomization.yaml`);
      problems++;
    }
  };
  for (const key of KUSTOMIZE_REFS) for (const p of doc[key] || []) ref(key, p);
  for (const p of doc.patches || []) if (p && p.path) ref("patches", p.path);
  for (const p of doc.patchesStrategicMerge || []) ref("patchesStrategicMerge", p);
  for (const g of [...(doc.configMapGenerator || []), ...(doc.secretGenerator || [])]) {
    for (const f of g.files || []) ref("generator file", String(f).split("=").pop());
    for (const f of g.envs || []) ref("generator envs", f);
  }
  return problems;
}

export async function validateText(text, name) {
  const out = { passed: 0, failed: 0, messages: [] };
  const fail = (m) => { out.messages.push(m); };
  const docs = parseAllDocuments(text, { uniqueKeys: true, prettyErrors: true });
  for (const [i, d] of docs.entries()) {
    const where = `${name}#${i + 1}`;
    const before = out.messages.length;
    if (d.errors.length) {
      fail(`${where}: YAML: ${d.errors.map((e) => e.message).join("; ")}`);
    } else {
      const obj = d.toJS();
      if (obj === null || obj === undefined) continue; // an empty document (a trailing ---)
      if (typeof obj !== "object" || Array.isArray(obj)) {
        fail(`${where}: not a mapping`);
      } else if (obj.kind === "Kustomization") {
        if (obj.apiVersion !== "kustomize.config.k8s.io/v1beta1")
          fail(`${where}: Kustomization apiVersion ${obj.apiVersion}`);
        if (path.basename(name) !== "kustomization.yaml")
          fail(`${where}: a Kustomization must be a kustomization.yaml`);
        checkKustomization(name, obj, fail);
      } else if (typeof obj.apiVersion !== "string" || typeof obj.kind !== "string") {
        fail(`${where}: no apiVersion or kind`);
      } else {
        const Model = await modelFor(obj.apiVersion, obj.kind);
        if (!Model) {
          fail(`${where}: unknown kind ${obj.apiVersion} ${obj.kind}`);
        } else {
          if (!obj.metadata || typeof obj.metadata.name !== "string" || !obj.metadata.name)
            fail(`${where}: ${obj.kind} without metadata.name`);
          try {
            new Model(obj).validate();
          } catch (e) {
            fail(`${where}: ${obj.kind} ${obj.metadata && obj.metadata.name}: ${e.message}`);
          }
        }
      }
    }
    if (out.messages.length > before) out.failed++;
    else out.passed++;
  }
  return out;
}

async function main(args) {
  const here = path.dirname(new URL(import.meta.url).pathname);
  const roots = args.length ? args : [path.resolve(here, "../../deploy/k8s")];
  let passed = 0, failed = 0;
  for (const root of roots) {
    const files = root === "-" ? ["-"] : yamlFiles(root);
    for (const f of files) {
      const text = f === "-" ? fs.readFileSync(0, "utf8") : fs.readFileSync(f, "utf8");
      const r = await validateText(text, f === "-" ? "stdin" : path.relative(process.cwd(), f));
      for (const m of r.messages) console.log("FAIL " + m);
      passed += r.passed;
      failed += r.failed;
    }
    if (root !== "-" && files.length === 0) {
      console.log(`FAIL ${root}: no YAML files`);
      failed++;
    }
  }
  console.log(`k8s manifests: ${passed} passed, ${failed} failed`);
  return failed ? 1 : 0;
}

process.exitCode = await main(process.argv.slice(2));
