// Package mqttcmd carries commands over MQTT 3.1.1 (mqtt311.go): requests
// published on <topic>/<caller> (commands.topic; the caller level bound to
// the client id or user by the broker's ACL, mosquitto: "pattern write
// <topic>/%c"), responses on the request's replyTo topic (when it has no
// wildcards, is not the broker's and not a request topic), else on
// <topic>/<caller>/reply, at QoS 1. Each transport has a connection of its
// own to the sink's broker (client id <sink's client id>-commands, clean
// session: commands sent while the gateway was away are not run when it
// comes back), reconnected by paho, subscribed at QoS 1 on every
// connection. Under scale-out the subscription is shared
// ($share/<group>/…), so that one replica runs each request. Requests go
// to the command engine without waiting (command.Engine.SubmitPayload); the
// response is published from the engine's worker without waiting for the
// broker's acknowledgement.
package mqttcmd
