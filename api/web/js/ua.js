// OPC UA JSON as the gateway sends it (Part 6 §5.4, Part 14 §7.2): field
// values in any of the field encodings (bare value, Variant with UaType,
// DataValue with Status and timestamps, legacy Type/Body), status codes as
// objects or numbers.

import { STATUS_NAMES } from "./statuscodes.js";

export const TYPE_NAMES = [
  "Null", "Boolean", "SByte", "Byte", "Int16", "UInt16", "Int32", "UInt32", "Int64", "UInt64", "Float",
  "Double", "String", "DateTime", "Guid", "ByteString", "XmlElement", "NodeId", "ExpandedNodeId",
  "StatusCode", "QualifiedName", "LocalizedText", "ExtensionObject", "DataValue", "Variant", "DiagnosticInfo",
];

export function typeName(t) { return TYPE_NAMES[t] || (t ? "Type " + t : ""); }

// status describes a StatusCode given as {Code, Symbol}, a number, or
// undefined (Good).
export function status(s) {
  let code = 0, sym = "";
  if (typeof s === "number") code = s >>> 0;
  else if (s && typeof s === "object") { code = (s.Code ?? s.code ?? 0) >>> 0; sym = s.Symbol || s.symbol || ""; }
  const sev = code >>> 30; // 0 good, 1 uncertain, 2/3 bad
  const level = sev === 0 ? "good" : sev === 1 ? "warn" : "bad";
  if (!sym) sym = STATUS_NAMES[(code & 0xffff0000) >>> 0] || (level === "good" ? "Good" : "0x" + code.toString(16).toUpperCase().padStart(8, "0"));
  return { code, symbol: sym, level };
}

function isStatusObject(v) {
  return v && typeof v === "object" && "Code" in v && !("Value" in v) && !("UaType" in v) && Object.keys(v).every((k) => k === "Code" || k === "Symbol");
}

// decode turns one field of a DataSetMessage's Payload (or a REST
// DataValue) into {value, type, status, ts}. value is the JavaScript value
// (undefined when the field has none).
export function decode(v) {
  // hasStatus: the encoding carried the status (a DataValue, or a Bad
  // status in place of the value); a bare value or Variant does not say
  // whether it is Good or Uncertain.
  const out = { value: undefined, type: 0, status: status(0), ts: "", hasStatus: false };
  if (v === undefined) return out;
  if (v === null || typeof v !== "object" || Array.isArray(v)) { out.value = v; return out; }
  if (isStatusObject(v)) { out.status = status(v); out.type = 19; out.hasStatus = true; return out; } // a Bad status in place of a Variant value
  if ("Type" in v && "Body" in v) { out.value = v.Body; out.type = v.Type; return out; } // legacy Variant
  const dv = "UaType" in v || "Value" in v || "Status" in v || "StatusCode" in v || "SourceTimestamp" in v || "ServerTimestamp" in v;
  if (!dv) { out.value = v; return out; } // a structure
  let val = v.Value, type = v.UaType || 0;
  if (val && typeof val === "object" && !Array.isArray(val) && ("UaType" in val || ("Type" in val && "Body" in val))) {
    type = val.UaType ?? val.Type; val = "Body" in val ? val.Body : val.Value; // DataValue holding a Variant (older form)
  }
  if (type === 19 && val && typeof val === "object") { // a status in place of the value (Part 14: a Bad field in the Variant encoding)
    out.status = status(val);
    out.hasStatus = true;
    out.ts = v.SourceTimestamp || v.ServerTimestamp || "";
    return out;
  }
  out.value = val;
  out.type = type;
  out.hasStatus = "Status" in v || "StatusCode" in v || "SourceTimestamp" in v || "ServerTimestamp" in v;
  out.status = status(v.Status ?? v.StatusCode);
  out.ts = v.SourceTimestamp || v.ServerTimestamp || "";
  return out;
}

// numeric returns the value as a number for a trend, or NaN.
export function numeric(value) {
  if (typeof value === "number") return value;
  if (typeof value === "boolean") return value ? 1 : 0;
  if (typeof value === "string" && value !== "" && /^-?\d+(\.\d+)?([eE][-+]?\d+)?$/.test(value)) return Number(value); // Int64 as a string
  return NaN;
}

const nf = new Intl.NumberFormat(undefined, { maximumFractionDigits: 4 });

// format renders a value for the table, short.
export function format(value, type) {
  if (value === undefined) return "";
  if (value === null) return "null";
  if (typeof value === "number") {
    if (type === 10 || type === 11 || !Number.isInteger(value)) return Math.abs(value) >= 1e9 || (value !== 0 && Math.abs(value) < 1e-4) ? value.toExponential(4) : nf.format(value);
    return String(value);
  }
  if (typeof value === "boolean") return value ? "true" : "false";
  if (typeof value === "string") return value;
  if (Array.isArray(value)) return "[" + value.length + "] " + value.slice(0, 6).map((x) => (typeof x === "object" ? JSON.stringify(x) : String(x))).join(", ") + (value.length > 6 ? ", …" : "");
  if (typeof value === "object" && "Text" in value) return value.Text; // LocalizedText
  if (typeof value === "object" && "Name" in value && Object.keys(value).length <= 2) return value.Name; // QualifiedName
  return JSON.stringify(value);
}

// time renders an ISO timestamp as local hh:mm:ss.mmm.
export function time(iso) {
  if (!iso) return "";
  const d = new Date(iso);
  if (isNaN(d)) return iso;
  return d.toLocaleTimeString(undefined, { hour12: false }) + "." + String(d.getMilliseconds()).padStart(3, "0");
}

export function shortPolicy(uri) {
  if (!uri) return "";
  const i = uri.lastIndexOf("#");
  return i >= 0 ? uri.slice(i + 1) : uri;
}
