// Encodes values given as JSON on stdin with node-opcua-json in its four
// schemes and prints one JSON object per case on stdout. Used by
// jsonenc's TestNodeOpcuaCrossCheck; see install-node.sh.
import { readFileSync } from "node:fs";
import * as J from "node-opcua-json";
import { Variant, DataType, VariantArrayType } from "node-opcua-variant";
import { DataValue } from "node-opcua-data-value";
import { coerceNodeId, coerceExpandedNodeId } from "node-opcua-nodeid";
import { coerceStatusCode } from "node-opcua-status-code";
import { coerceQualifiedName, coerceLocalizedText } from "node-opcua-data-model";

const input = JSON.parse(readFileSync(0, "utf8"));
const ns = input.namespaces;

function scalar(type, v) {
  switch (type) {
    case "Int64": case "UInt64": return v; // [high, low]
    case "DateTime": return new Date(v);
    case "ByteString": return v === null ? null : Buffer.from(v, "base64");
    case "NodeId": return coerceNodeId(v);
    case "ExpandedNodeId": return coerceExpandedNodeId(v);
    case "StatusCode": return coerceStatusCode(v);
    case "QualifiedName": return coerceQualifiedName(v);
    case "LocalizedText": return coerceLocalizedText(v);
    default: return v;
  }
}

function variant(c) {
  const opts = { dataType: DataType[c.type], arrayType: VariantArrayType.Scalar };
  if (c.array) {
    opts.arrayType = c.dims ? VariantArrayType.Matrix : VariantArrayType.Array;
    opts.value = c.value.map((x) => scalar(c.type, x));
    if (c.type === "Double") opts.value = new Float64Array(opts.value);
    if (c.type === "Int32") opts.value = new Int32Array(opts.value);
    if (c.dims) opts.dimensions = c.dims;
  } else {
    opts.value = scalar(c.type, c.value);
  }
  return new Variant(opts);
}

const schemes = {
  compact: J.JsonEncodingScheme.Compact,
  verbose: J.JsonEncodingScheme.Verbose,
  reversible104: J.JsonEncodingScheme.DeprecatedReversible,
  nonreversible104: J.JsonEncodingScheme.DeprecatedNonReversible,
};

for (const c of input.cases) {
  const out = { name: c.name };
  for (const [mode, scheme] of Object.entries(schemes)) {
    try {
      const v = variant(c);
      let js;
      if (c.dv) {
        const dv = new DataValue({
          value: v,
          statusCode: coerceStatusCode(c.dv.status || 0),
          sourceTimestamp: c.dv.sourceTimestamp ? new Date(c.dv.sourceTimestamp) : null,
          sourcePicoseconds: c.dv.sourcePicoseconds || 0,
          serverTimestamp: c.dv.serverTimestamp ? new Date(c.dv.serverTimestamp) : null,
        });
        js = J.opcuaJsonEncodeDataValue(dv, scheme, ns);
      } else {
        js = J.opcuaJsonEncodeVariant(v, scheme, ns);
      }
      out[mode] = JSON.stringify(js === undefined ? null : js);
    } catch (e) {
      out[mode] = "ERROR: " + e.message;
    }
  }
  process.stdout.write(JSON.stringify(out) + "\n");
}
