// Package embedded runs the brokers of the gateway's one-machine setup in
// its own process: an MQTT broker (mochi-mqtt) and a NATS server with
// JetStream (nats-server). Each is on when the configuration names no
// external broker to replace it (config.Embedded); the sinks then connect to
// it over loopback like to any other broker.
//
//	m, err := embedded.StartMQTT(ctx, cfg.Embedded.MQTT.Listen, log) // tcp://127.0.0.1:1883
//	n, err := embedded.StartNATS(ctx, cfg.Embedded.NATS.Listen, filepath.Join(stateDir, "nats"), log)
//	defer n.Close(); defer m.Close()
//
// # What is guaranteed
//
// Both let every client in, without authentication or ACLs, which is why
// they listen on loopback by default (DefaultMQTTListen, DefaultNATSListen);
// a listen address beyond loopback is logged as a warning. The MQTT broker
// keeps everything in memory: retained messages (the gateway's metadata and
// status) and sessions are lost at a restart; packets are limited to 16 MiB
// and disconnected sessions expire after a day. The NATS server stores
// JetStream streams in the given directory, which survives restarts; its
// JetStream limits are nats-server's defaults (a share of the machine's
// memory and disk).
//
// A start that cannot listen returns a *ListenError whose message names the
// settings to change ("embedded mqtt: listen 127.0.0.1:1883: address already
// in use (set embedded.mqtt.listen or embedded.mqtt.enabled: false)"); it
// wraps the system's error (errors.Is(err, syscall.EADDRINUSE)).
//
// # Logs
//
// Both servers log through the given *slog.Logger (component=embedded-mqtt,
// embedded-nats) at warning level and above only; their routine notices are
// dropped. nats-server's printf-style logger is adapted to slog; its fatal
// errors do not exit the process but fail StartNATS.
//
// # Goroutines and ownership
//
// The caller owns the returned *MQTT or *NATS and must Close it; Close
// disconnects the clients, stops the server and waits for it, and may be
// called more than once. ctx bounds only the start (StartNATS waits until
// the server accepts clients, at most until ctx ends or 10 s).
//
// The MQTT broker listens on a socket StartMQTT opens itself (so that a busy
// port is reported at once) through a listener of this package that counts
// the goroutine of each connection; Close waits for the accept loop and for
// every connection's goroutine. mochi-mqtt's own housekeeping goroutine ends
// when Close returns, without being waited for. nats-server tracks its
// goroutines itself: Close is Shutdown followed by WaitForShutdown. No
// signal handlers are installed.
package embedded
