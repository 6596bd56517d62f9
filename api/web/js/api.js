// The REST API client: JSON in and out, RFC 9457 problems as ApiError.
// Credentials are the gateway's session cookie (HttpOnly, SameSite=Strict),
// set by login(): this page's scripts never keep the API key, and it never
// goes into a URL.

export class ApiError extends Error {
  constructor(status, problem) {
    super(problem?.detail || problem?.title || `HTTP ${status}`);
    this.status = status;
    this.problem = problem || {};
  }
}

// login signs this browser in with an API key (the gateway answers with
// the session cookie); it resolves to {name, role} or throws ApiError.
export async function login(key) {
  return request("POST", "/api/v1/login", { key });
}

// logout ends the session.
export async function logout() {
  return request("POST", "/api/v1/logout", {});
}

// onUnauthorized is called (once per burst) when the API answers 401.
let unauthorized = () => {};
let asking = false;
export function onUnauthorized(fn) { unauthorized = fn; }

export async function request(method, path, body) {
  const headers = { Accept: "application/json" };
  const init = { method, headers, cache: "no-store", credentials: "same-origin" };
  if (body !== undefined) {
    headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  let resp;
  try {
    resp = await fetch(path, init);
  } catch (e) {
    throw new ApiError(0, { title: "gateway unreachable", detail: "The gateway does not answer (" + e.message + ")" });
  }
  if (resp.status === 204) return null;
  const text = await resp.text();
  let data = null;
  if (text) {
    try { data = JSON.parse(text); } catch { data = { detail: text.slice(0, 200) }; }
  }
  if (!resp.ok) {
    if (resp.status === 401 && !asking && path !== "/api/v1/login") {
      asking = true;
      Promise.resolve(unauthorized()).finally(() => { asking = false; });
    }
    throw new ApiError(resp.status, data);
  }
  return data;
}

export const get = (p) => request("GET", p);
export const post = (p, b) => request("POST", p, b ?? {});
export const del = (p) => request("DELETE", p);

// all follows nextCursor until the list ends or max items are read.
export async function all(path, max = 20000) {
  const out = [];
  let cursor = "";
  const sep = path.includes("?") ? "&" : "?";
  for (;;) {
    const page = await get(path + sep + "limit=1000" + (cursor ? "&cursor=" + encodeURIComponent(cursor) : ""));
    out.push(...(page.items || []));
    cursor = page.nextCursor;
    if (!cursor || out.length >= max) return out;
  }
}

export const enc = encodeURIComponent;
