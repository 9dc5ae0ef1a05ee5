/** Telling a database URL from a file path (no adapter imported: the public declarations use it). */

const URL_LIKE = /^[A-Za-z][A-Za-z0-9+.-]*:\/\//;

/** Whether a database name is a URL (`postgres://…`, `file://…`) rather than a path. */
export function isDatabaseUrl(name: string): boolean {
  return URL_LIKE.test(name);
}

/** The URL with its credentials replaced by `…`, for messages. */
export function redactUrl(url: string): string {
  return url.replace(/\/\/[^@/]*@/, '//…@');
}
