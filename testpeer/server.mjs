// node-opcua interop peer for the gateway's tests.
//
// Started by the Go helper testpeer/nodeopcua (or by hand: `node server.mjs --port 4840`),
// it listens on 127.0.0.1 only and prints one line
//
//     READY opc.tcp://127.0.0.1:<port>/UA/TestServer
//
// on stdout once the endpoint accepts connections. Everything else goes to stderr.
// It exits cleanly on SIGTERM or SIGINT, and when its stdin is a pipe, when that pipe
// closes (so a test binary that dies never leaves an orphan server behind).
//
// Configuration: command-line flags win over environment variables.
//
//   --port N          / PORT                  TCP port (default 4840; 0: one the system chooses,
//                                             named in the READY line)
//   --pki DIR         / PKI_DIR               PKI root (server/ and user/ stores below it);
//                                             default: a new temp dir, removed on exit
//   --large N         / LARGE_COUNT           variables in Demo/Large (default 5000)
//   --path P          / RESOURCE_PATH         endpoint path (default /UA/TestServer)
//   MAX_NODES_PER_READ, MAX_NODES_PER_WRITE, MAX_NODES_PER_BROWSE, MAX_NODES_PER_METHOD_CALL,
//   MAX_MONITORED_ITEMS_PER_CALL, MAX_NODES_PER_REGISTER_NODES,
//   MAX_NODES_PER_TRANSLATE_BROWSE_PATHS_TO_NODE_IDS, MAX_NODES_PER_NODE_MANAGEMENT,
//   MAX_NODES_PER_HISTORY_READ_DATA, MAX_NODES_PER_HISTORY_READ_EVENTS
//                                             server OperationLimits (0/unset: node-opcua default)
//   MAX_BROWSE_CONTINUATION_POINTS             ServerCapabilities.MaxBrowseContinuationPoints
//   COUNTER_INTERVAL_MS                        Counter period (default 100)
//   COUNTER_EXCEPTION_BASED=1                  Counter reports every change: its MinimumSamplingInterval
//                                             and the server's MinSupportedSampleRate are 0, so an item
//                                             asking for sampling interval 0 misses no value
//   --counters N      / COUNTERS                Int32 counters in Demo/Counters (default 0), all +1 every
//                                             COUNTER_INTERVAL_MS with the Counter; they report every change
//                                             (MinimumSamplingInterval 0, as COUNTER_EXCEPTION_BASED):
//                                             the load of `gateway bench -upstream nodeopcua`
//   HISTORY_VALUES                             N > 0: Counter and the Counters are Historizing, the last N
//                                             values of each kept in memory for HistoryRead (default 0)
//
// Address space (namespace 1, the server's own; string node ids):
//
//   Objects/Demo                    ns=1;s=Demo
//     Counter   Double   read-only, +1 every COUNTER_INTERVAL_MS      ns=1;s=Demo.Counter
//     Int32     Int32    read-only, -42                                ns=1;s=Demo.Int32
//     String    String   read-only, "Hello, gateway"                   ns=1;s=Demo.String
//     Boolean   Boolean  read-only, true                               ns=1;s=Demo.Boolean
//     DoubleArray Double[] read-only, [1.5, 2.5, 3.5, 4.5]             ns=1;s=Demo.DoubleArray
//     Setpoint  Double   read/write, 0                                 ns=1;s=Demo.Setpoint
//     Level     Int16    read/write, 0                                 ns=1;s=Demo.Level
//     Add(a Double, b Double) -> sum Double                            ns=1;s=Demo.Add
//     Large/    folder                                                 ns=1;s=Demo.Large
//       V00000 … V<N-1>  Int32 read-only, value = index                ns=1;s=Demo.Large.V00000
//     Counters/ folder (with --counters N)                             ns=1;s=Demo.Counters
//       V00000 … V<N-1>  Int32 read-only, +1 every COUNTER_INTERVAL_MS ns=1;s=Demo.Counters.V00000
//
// Users: anonymous; "user1"/"password1"; "admin"/"admin-secret" (any other pair is
// refused with BadUserAccessDenied); X509 user certificates are accepted automatically.
// Client application certificates are accepted automatically.

import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import process from "node:process";

const log = (...args) => console.error("[testpeer]", ...args);

function parseArgs(argv) {
    const out = {};
    for (let i = 0; i < argv.length; i++) {
        const a = argv[i];
        if (!a.startsWith("--")) {
            throw new Error(`unexpected argument ${JSON.stringify(a)}`);
        }
        const eq = a.indexOf("=");
        if (eq > 0) {
            out[a.slice(2, eq)] = a.slice(eq + 1);
        } else {
            if (i + 1 >= argv.length) {
                throw new Error(`flag ${a} needs a value`);
            }
            out[a.slice(2)] = argv[++i];
        }
    }
    return out;
}

function intSetting(value, name, def) {
    if (value === undefined || value === "") {
        return def;
    }
    const n = Number.parseInt(value, 10);
    if (!Number.isFinite(n) || n < 0 || String(n) !== String(value).trim()) {
        throw new Error(`${name}: want a non-negative integer, got ${JSON.stringify(value)}`);
    }
    return n;
}

const args = parseArgs(process.argv.slice(2));
const env = process.env;
const port = intSetting(args.port ?? env.PORT, "port", 4840);
const largeCount = intSetting(args.large ?? env.LARGE_COUNT, "large", 5000);
const counterInterval = intSetting(env.COUNTER_INTERVAL_MS, "COUNTER_INTERVAL_MS", 100) || 100;
const counterCount = intSetting(args.counters ?? env.COUNTERS, "counters", 0);
let resourcePath = args.path ?? env.RESOURCE_PATH ?? "/UA/TestServer";
if (!resourcePath.startsWith("/")) {
    resourcePath = "/" + resourcePath;
}
let pkiDir = args.pki ?? env.PKI_DIR ?? "";
let removePki = false;
if (pkiDir === "") {
    pkiDir = fs.mkdtempSync(path.join(os.tmpdir(), "testpeer-pki-"));
    removePki = true;
}
fs.mkdirSync(pkiDir, { recursive: true });

const limitEnv = {
    maxNodesPerRead: "MAX_NODES_PER_READ",
    maxNodesPerWrite: "MAX_NODES_PER_WRITE",
    maxNodesPerBrowse: "MAX_NODES_PER_BROWSE",
    maxNodesPerMethodCall: "MAX_NODES_PER_METHOD_CALL",
    maxMonitoredItemsPerCall: "MAX_MONITORED_ITEMS_PER_CALL",
    maxNodesPerRegisterNodes: "MAX_NODES_PER_REGISTER_NODES",
    maxNodesPerTranslateBrowsePathsToNodeIds: "MAX_NODES_PER_TRANSLATE_BROWSE_PATHS_TO_NODE_IDS",
    maxNodesPerNodeManagement: "MAX_NODES_PER_NODE_MANAGEMENT",
    maxNodesPerHistoryReadData: "MAX_NODES_PER_HISTORY_READ_DATA",
    maxNodesPerHistoryReadEvents: "MAX_NODES_PER_HISTORY_READ_EVENTS",
};
const operationLimits = {};
for (const [key, name] of Object.entries(limitEnv)) {
    const v = intSetting(env[name], name, 0);
    if (v > 0) {
        operationLimits[key] = v;
    }
}
const historyValues = intSetting(env.HISTORY_VALUES, "HISTORY_VALUES", 0);
const counterExceptionBased = (env.COUNTER_EXCEPTION_BASED ?? "") === "1" || counterCount > 0;
// Tests open many sessions in a row; keep the default of 10 from getting in the way.
const serverCapabilities = { operationLimits, maxSessions: 100 };
if (counterExceptionBased) {
    serverCapabilities.minSupportedSampleRate = 0;
}
const maxBrowseCP = intSetting(env.MAX_BROWSE_CONTINUATION_POINTS, "MAX_BROWSE_CONTINUATION_POINTS", 0);
if (maxBrowseCP > 0) {
    serverCapabilities.maxBrowseContinuationPoints = maxBrowseCP;
}

const users = new Map([
    ["user1", "password1"],
    ["admin", "admin-secret"],
]);

// node-opcua is ESM-only in this version and takes seconds to load; import it only
// once the arguments are known to be good.
const opcua = await import("node-opcua");
const {
    OPCUAServer,
    OPCUACertificateManager,
    SecurityPolicy,
    MessageSecurityMode,
    DataType,
    Variant,
    VariantArrayType,
    StatusCodes,
    AccessLevelFlag,
} = opcua;

const serverCertificateManager = new OPCUACertificateManager({
    rootFolder: path.join(pkiDir, "server"),
    automaticallyAcceptUnknownCertificate: true,
    disableFileWatchers: true,
});
const userCertificateManager = new OPCUACertificateManager({
    rootFolder: path.join(pkiDir, "user"),
    automaticallyAcceptUnknownCertificate: true,
    disableFileWatchers: true,
});

// node-opcua's own certificate names this machine's host name and external
// addresses, not the loopback address the peer listens on; a client that checks
// the hostname (ours does by default) would refuse it. Create the certificate
// first, for the names it is reached at; node-opcua keeps an existing one.
await serverCertificateManager.initialize();
const certificateFile = path.join(serverCertificateManager.rootDir, "own", "certs", "certificate.pem");
if (!fs.existsSync(certificateFile)) {
    await serverCertificateManager.createSelfSignedCertificate({
        applicationUri: "urn:uagate:testpeer:node-opcua",
        dns: [...new Set(["localhost", os.hostname()])],
        ip: ["127.0.0.1"],
        outputFile: certificateFile,
        subject: "/CN=uagate node-opcua test peer/O=uagate",
        startDate: new Date(Date.now() - 60 * 60 * 1000),
        validity: 365 * 10,
    });
}

const server = new OPCUAServer({
    certificateFile,
    port,
    host: "127.0.0.1",
    hostname: "127.0.0.1",
    resourcePath,
    serverCertificateManager,
    userCertificateManager,
    securityPolicies: [
        SecurityPolicy.None,
        SecurityPolicy.Basic256Sha256,
        SecurityPolicy.Aes128_Sha256_RsaOaep,
        SecurityPolicy.Aes256_Sha256_RsaPss,
    ],
    securityModes: [MessageSecurityMode.None, MessageSecurityMode.Sign, MessageSecurityMode.SignAndEncrypt],
    allowAnonymous: true,
    userManager: {
        isValidUser(userName, password) {
            return users.has(userName) && users.get(userName) === password;
        },
    },
    serverInfo: {
        applicationUri: "urn:uagate:testpeer:node-opcua",
        productUri: "urn:uagate:testpeer",
        applicationName: { text: "uagate node-opcua test peer", locale: "en" },
    },
    buildInfo: {
        productName: "uagate-testpeer",
        manufacturerName: "uagate",
    },
    serverCapabilities,
    maxConnectionsPerEndpoint: 100,
});

let counterTimer = null;

function buildAddressSpace() {
    const addressSpace = server.engine.addressSpace;
    const ns = addressSpace.getOwnNamespace();
    const id = (s) => `ns=${ns.index};s=${s}`;
    const ro = AccessLevelFlag.CurrentRead;
    const rw = AccessLevelFlag.CurrentRead | AccessLevelFlag.CurrentWrite;

    const demo = ns.addFolder(addressSpace.rootFolder.objects, { browseName: "Demo", nodeId: id("Demo") });

    const counter = ns.addVariable({
        componentOf: demo,
        browseName: "Counter",
        nodeId: id("Demo.Counter"),
        dataType: "Double",
        accessLevel: ro,
        userAccessLevel: ro,
        minimumSamplingInterval: counterExceptionBased ? 0 : counterInterval,
        value: new Variant({ dataType: DataType.Double, value: 0 }),
    });
    const counters = [];
    if (counterCount > 0) {
        const folder = ns.addFolder(demo, { browseName: "Counters", nodeId: id("Demo.Counters") });
        for (let i = 0; i < counterCount; i++) {
            const name = "V" + String(i).padStart(5, "0");
            counters.push(
                ns.addVariable({
                    organizedBy: folder,
                    browseName: name,
                    nodeId: id(`Demo.Counters.${name}`),
                    dataType: "Int32",
                    accessLevel: ro,
                    userAccessLevel: ro,
                    minimumSamplingInterval: 0,
                    value: new Variant({ dataType: DataType.Int32, value: 0 }),
                }),
            );
        }
    }
    if (historyValues > 0) {
        for (const v of [counter, ...counters]) {
            addressSpace.installHistoricalDataNode(v, { maxOnlineValues: historyValues });
        }
    }
    let count = 0;
    counterTimer = setInterval(() => {
        count += 1;
        // One source timestamp for the tick: every counter's value count has it.
        const now = new Date();
        counter.setValueFromSource(new Variant({ dataType: DataType.Double, value: count }), StatusCodes.Good, now);
        for (const c of counters) {
            c.setValueFromSource(new Variant({ dataType: DataType.Int32, value: count }), StatusCodes.Good, now);
        }
    }, counterInterval);

    const scalar = (name, dataType, value, access) =>
        ns.addVariable({
            componentOf: demo,
            browseName: name,
            nodeId: id(`Demo.${name}`),
            dataType,
            accessLevel: access,
            userAccessLevel: access,
            value: new Variant({ dataType: DataType[dataType], value }),
        });
    scalar("Int32", "Int32", -42, ro);
    scalar("String", "String", "Hello, gateway", ro);
    scalar("Boolean", "Boolean", true, ro);
    scalar("Setpoint", "Double", 0, rw);
    scalar("Level", "Int16", 0, rw);
    ns.addVariable({
        componentOf: demo,
        browseName: "DoubleArray",
        nodeId: id("Demo.DoubleArray"),
        dataType: "Double",
        valueRank: 1,
        arrayDimensions: [0],
        accessLevel: ro,
        userAccessLevel: ro,
        value: new Variant({
            dataType: DataType.Double,
            arrayType: VariantArrayType.Array,
            value: new Float64Array([1.5, 2.5, 3.5, 4.5]),
        }),
    });

    const add = ns.addMethod(demo, {
        browseName: "Add",
        nodeId: id("Demo.Add"),
        inputArguments: [
            { name: "a", description: { text: "first addend" }, dataType: DataType.Double },
            { name: "b", description: { text: "second addend" }, dataType: DataType.Double },
        ],
        outputArguments: [{ name: "sum", description: { text: "a + b" }, dataType: DataType.Double }],
    });
    // node-opcua tells the promise form from the callback form by the arity: keep two parameters.
    add.bindMethod(async (inputArguments, _context) => {
        const a = inputArguments[0].value;
        const b = inputArguments[1].value;
        return {
            statusCode: StatusCodes.Good,
            outputArguments: [new Variant({ dataType: DataType.Double, value: a + b })],
        };
    });

    const large = ns.addFolder(demo, { browseName: "Large", nodeId: id("Demo.Large") });
    for (let i = 0; i < largeCount; i++) {
        const name = "V" + String(i).padStart(5, "0");
        ns.addVariable({
            organizedBy: large,
            browseName: name,
            nodeId: id(`Demo.Large.${name}`),
            dataType: "Int32",
            accessLevel: ro,
            userAccessLevel: ro,
            value: new Variant({ dataType: DataType.Int32, value: i }),
        });
    }
}

let stopping = false;
async function shutdown(why, code = 0) {
    if (stopping) {
        return;
    }
    stopping = true;
    log(`shutting down (${why})`);
    if (counterTimer) {
        clearInterval(counterTimer);
    }
    // A hung shutdown must not keep the port: leave after 5 s whatever happens.
    setTimeout(() => process.exit(code || 1), 5000).unref();
    try {
        await server.shutdown(0);
        await serverCertificateManager.dispose?.();
        await userCertificateManager.dispose?.();
    } catch (err) {
        log("shutdown error:", err?.message ?? err);
        code = code || 1;
    }
    if (removePki) {
        fs.rmSync(pkiDir, { recursive: true, force: true });
    }
    process.exit(code);
}

process.on("SIGTERM", () => shutdown("SIGTERM"));
process.on("SIGINT", () => shutdown("SIGINT"));
try {
    if (fs.fstatSync(0).isFIFO()) {
        process.stdin.on("end", () => shutdown("stdin closed"));
        process.stdin.on("error", () => shutdown("stdin error"));
        process.stdin.resume();
    }
} catch {
    // no stdin at all: rely on signals
}

try {
    await server.initialize();
    buildAddressSpace();
    await server.start();
} catch (err) {
    log("failed to start:", err?.stack ?? err);
    await shutdown("start failure", 2);
}

// With --port 0 the system chose the port: the endpoints name it.
let boundPort = port;
const firstEndpoint = server.endpoints[0]?.endpointDescriptions()[0]?.endpointUrl ?? "";
const portMatch = /:(\d+)\//.exec(firstEndpoint);
if (portMatch) {
    boundPort = Number(portMatch[1]);
}
const url = `opc.tcp://127.0.0.1:${boundPort}${resourcePath}`;
log(`listening on ${url}; endpoints:`);
for (const ep of server.endpoints) {
    for (const d of ep.endpointDescriptions()) {
        log(`  ${d.endpointUrl} ${d.securityPolicyUri.split("#")[1]} ${MessageSecurityMode[d.securityMode]}`);
    }
}
process.stdout.write(`READY ${url}\n`);
