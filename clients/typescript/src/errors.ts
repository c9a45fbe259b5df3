// Typed errors: every answer of the daemon that is not a success becomes a
// CiError, or the subclass named after its error code (docs/api.md,
// "Errors"), so callers can test `err instanceof Expired`. A daemon that
// cannot be reached is ConnectionFailed (code "connection", status null).
import type { components } from "./schema.js";

export type ErrorCode = components["schemas"]["ErrorCode"];
export type ErrorObject = components["schemas"]["Error"]["error"];

export class CiError extends Error {
  /** The daemon's error code ("not_found", "busy", ...), or "connection" / "protocol" / "timeout" for the client's own. */
  readonly code: ErrorCode | "connection" | "protocol";
  /** The HTTP status, or null when there was no answer. */
  readonly status: number | null;
  /** The error object as the daemon sent it (it may carry more, such as `quota`). */
  readonly body: Partial<ErrorObject> & Record<string, unknown>;
  /** The answer's headers (lower-case names). */
  readonly headers: Record<string, string>;

  constructor(message: string, code: CiError["code"], status: number | null,
              body: Record<string, unknown> = {}, headers: Record<string, string> = {}) {
    super(message);
    this.name = new.target.name;
    this.code = code;
    this.status = status;
    this.body = body;
    this.headers = headers;
  }

  /** Seconds to wait before trying again (Retry-After), when the daemon said. */
  get retryAfter(): number | null {
    const v = this.headers["retry-after"];
    return v !== undefined && /^\d+$/.test(v) ? Number(v) : null;
  }
}

export class BadRequest extends CiError {}
export class BadPath extends BadRequest {}
export class Unauthorized extends CiError {}
export class Forbidden extends CiError {}
export class NotFound extends CiError {}
export class MethodNotAllowed extends CiError {}
export class UnsupportedMediaType extends CiError {}
export class Busy extends CiError {}
export class Conflict extends CiError {}
export class IsADirectory extends Conflict {}
export class Expired extends CiError {}
export class NodeLost extends Expired {}
export class PayloadTooLarge extends CiError {}
export class Corrupt extends CiError {}
export class QuotaExceeded extends CiError {
  /** The quota's name ("sessions", "requests_per_second", ...). */
  get quota(): string | undefined {
    return this.body.quota as string | undefined;
  }
}
export class Internal extends CiError {}
export class Unavailable extends CiError {}
export class Timeout extends CiError {}
export class ConnectionFailed extends CiError {}
export class ProtocolError extends CiError {}

type ErrorClass = new (message: string, code: CiError["code"], status: number | null,
                       body?: Record<string, unknown>, headers?: Record<string, string>) => CiError;

// Every ErrorCode of the spec must be here: the Record type makes a code the
// spec adds a compile error until it is mapped.
const BY_CODE: Record<ErrorCode, ErrorClass> = {
  bad_request: BadRequest,
  bad_path: BadPath,
  unauthorized: Unauthorized,
  forbidden: Forbidden,
  not_found: NotFound,
  method_not_allowed: MethodNotAllowed,
  unsupported_media_type: UnsupportedMediaType,
  busy: Busy,
  conflict: Conflict,
  is_a_directory: IsADirectory,
  expired: Expired,
  node_lost: NodeLost,
  payload_too_large: PayloadTooLarge,
  corrupt: Corrupt,
  quota_exceeded: QuotaExceeded,
  internal: Internal,
  unavailable: Unavailable,
  timeout: Timeout,
};

const BY_STATUS: Record<number, [ErrorClass, ErrorCode]> = {
  400: [BadRequest, "bad_request"], 401: [Unauthorized, "unauthorized"], 403: [Forbidden, "forbidden"],
  404: [NotFound, "not_found"], 405: [MethodNotAllowed, "method_not_allowed"], 409: [Busy, "busy"],
  410: [Expired, "expired"], 413: [PayloadTooLarge, "payload_too_large"],
  415: [UnsupportedMediaType, "unsupported_media_type"], 422: [Corrupt, "corrupt"],
  429: [QuotaExceeded, "quota_exceeded"], 500: [Internal, "internal"], 503: [Unavailable, "unavailable"],
  504: [Timeout, "timeout"],
};

/** The typed error for an error object {code, message, ...}. */
export function fromErrorObject(err: Record<string, unknown>, status: number | null,
                                headers: Record<string, string> = {}): CiError {
  const code = typeof err.code === "string" ? err.code : "internal";
  const message = typeof err.message === "string" ? err.message : code;
  const cls = BY_CODE[code as ErrorCode] ?? (status !== null ? BY_STATUS[status]?.[0] : undefined) ?? CiError;
  return new cls(message, code as ErrorCode, status, err, headers);
}

/** The typed error for a non-2xx answer. */
export function fromResponse(status: number, headers: Record<string, string>, body: string): CiError {
  try {
    const doc = JSON.parse(body) as unknown;
    if (doc && typeof doc === "object" && "error" in doc) {
      const err = (doc as { error: unknown }).error;
      if (err && typeof err === "object") return fromErrorObject(err as Record<string, unknown>, status, headers);
    }
  } catch {
    // not JSON: typed by the status below
  }
  const [cls, code] = BY_STATUS[status] ?? [CiError, "internal" as ErrorCode];
  return new cls(`HTTP ${status}: ${body.slice(0, 200) || "no body"}`, code, status, {}, headers);
}
