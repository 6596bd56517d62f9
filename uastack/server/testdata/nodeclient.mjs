// node-opcua client for the simulation server's interop test
// (uastack/server/interop_nodeopcua_test.go).
//
//   NODEOPCUA_DIR=<testpeer dir> [NODECLIENT_PKI=<dir>] node nodeclient.mjs <endpoint URL> '<JSON cases>'
//
// Each case {name, policy, mode, user?, password?} connects with that security
// policy and mode, creates a session, browses Objects, reads Demo.Counter,
// subscribes to it until three data changes arrived, and closes. One JSON line
// per case goes to stdout after "RESULT ": {name, ok, error?, browse, read, values, ms}.

import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import process from "node:process";
import { pathToFileURL } from "node:url";

const [url, casesJSON] = process.argv.slice(2);
const dir = process.env.NODEOPCUA_DIR;
if (!url || !casesJSON || !dir) {
    console.error("usage: NODEOPCUA_DIR=dir node nodeclient.mjs <url> <cases JSON>");
    process.exit(2);
}
const opcua = await import(pathToFileURL(path.join(dir, "node_modules", "node-opcua", "dist", "index.js")).href);
const {
    OPCUAClient,
    OPCUACertificateManager,
    MessageSecurityMode,
    SecurityPolicy,
    AttributeIds,
    TimestampsToReturn,
    ClientSubscription,
    ClientMonitoredItem,
    UserTokenType,
} = opcua;

// NODECLIENT_PKI keeps the client's PKI (and so its certificate) across runs, for
// tests that refuse the certificate, trust it and connect again; by default the
// PKI is a temporary directory, removed at the end.
const keepPKI = process.env.NODECLIENT_PKI || "";
const pki = keepPKI || fs.mkdtempSync(path.join(os.tmpdir(), "uagate-nodeclient-"));
const clientCertificateManager = new OPCUACertificateManager({
    rootFolder: pki,
    automaticallyAcceptUnknownCertificate: true,
    disableFileWatchers: true,
});
await clientCertificateManager.initialize();

function withTimeout(p, ms, what) {
    let timer;
    return Promise.race([
        p.finally(() => clearTimeout(timer)),
        new Promise((_, reject) => {
            timer = setTimeout(() => reject(new Error(`${what}: timeout after ${ms} ms`)), ms);
        }),
    ]);
}

async function runCase(c) {
    const client = OPCUAClient.create({
        applicationName: "uagate-nodeclient",
        securityMode: MessageSecurityMode[c.mode],
        securityPolicy: SecurityPolicy[c.policy],
        endpointMustExist: false,
        clientCertificateManager,
        connectionStrategy: { maxRetry: 0, initialDelay: 100, maxDelay: 200 },
        requestedSessionTimeout: 60000,
    });
    const result = {};
    await withTimeout(client.connect(url), 20000, "connect");
    try {
        const identity = c.user
            ? { type: UserTokenType.UserName, userName: c.user, password: c.password }
            : { type: UserTokenType.Anonymous };
        const session = await withTimeout(client.createSession(identity), 20000, "createSession");
        const br = await session.browse("ns=0;i=85");
        result.browse = br.references.map((r) => r.browseName.name);
        const dv = await session.read({ nodeId: "ns=1;s=Demo.Counter", attributeId: AttributeIds.Value });
        result.read = dv.value.value;
        result.readStatus = dv.statusCode.name;
        const sub = ClientSubscription.create(session, {
            requestedPublishingInterval: 50,
            requestedLifetimeCount: 600,
            requestedMaxKeepAliveCount: 10,
            maxNotificationsPerPublish: 100,
            publishingEnabled: true,
            priority: 1,
        });
        const item = ClientMonitoredItem.create(
            sub,
            { nodeId: "ns=1;s=Demo.Counter", attributeId: AttributeIds.Value },
            { samplingInterval: 50, discardOldest: true, queueSize: 1 },
            TimestampsToReturn.Both,
        );
        result.values = await withTimeout(
            new Promise((resolve, reject) => {
                const vs = [];
                item.on("changed", (v) => {
                    vs.push(v.value.value);
                    if (vs.length >= 3) resolve(vs);
                });
                item.on("err", (e) => reject(new Error(String(e))));
            }),
            20000,
            "data changes",
        );
        await sub.terminate();
        await session.close();
    } finally {
        await client.disconnect();
    }
    return result;
}

for (const c of JSON.parse(casesJSON)) {
    const t0 = Date.now();
    let out;
    try {
        out = { name: c.name, ok: true, ...(await runCase(c)) };
    } catch (e) {
        out = { name: c.name, ok: false, error: String((e && e.message) || e) };
    }
    out.ms = Date.now() - t0;
    console.log("RESULT " + JSON.stringify(out));
}
if (!keepPKI) {
    fs.rmSync(pki, { recursive: true, force: true });
}
process.exit(0);
