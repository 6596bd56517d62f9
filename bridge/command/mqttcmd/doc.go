// Package mqttcmd carries commands over MQTT, 3.1.1 (mqtt311.go,
// eclipse/paho.mqtt.golang) or 5 (mqtt5.go, eclipse/paho.golang's
// autopaho), as the sink's protocolVersion says: requests published on
// <topic>/<caller> (commands.topic; the caller level bound to the client
// id or user by the broker's ACL, mosquitto: "pattern write <topic>/%c"),
// responses at QoS 1 on
//
//   - MQTT 5: the request's Response Topic, with its Correlation Data, the
//     Content Type application/json and Payload Format Indicator 1;
//   - else (and for a Response Topic that may not be used) the request's
//     replyTo topic, else <topic>/<caller>/reply.
//
// A reply topic is used when it has no wildcards, is not the broker's ($…)
// and not a request topic (command.CheckReplyTo). Each transport has a
// connection of its own to the sink's broker (client id <sink's client
// id>-commands, clean session: commands sent while the gateway was away
// are not run when it comes back), reconnected by paho, subscribed at QoS 1
// on every connection. Under scale-out the subscription is shared
// ($share/<group>/…), so that one replica runs each request. Requests go
// to the command engine without waiting (command.Engine.SubmitPayload);
// the response is handed to the client from the engine's worker without
// waiting for the broker's acknowledgement (MQTT 5: through autopaho's
// queue, bounded at MaxPendingResponses).
package mqttcmd
