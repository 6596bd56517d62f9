package embedded

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// natsReadyTimeout bounds the wait for the server to accept clients when
// ctx has no deadline.
const natsReadyTimeout = 10 * time.Second

// NATS is an embedded NATS server with JetStream, in this process. It lets
// every client in.
type NATS struct {
	srv       *server.Server
	addr      string
	closeOnce sync.Once
}

// StartNATS starts the server on listen (host:port; DefaultNATSListen when
// empty, port 0 for one the system chooses) with JetStream storing in
// storeDir, and waits until it accepts clients (until ctx ends, or 10 s
// without a deadline). It installs no signal handlers; its log goes to
// logger at warning and above. ctx bounds the start only; Close stops it.
func StartNATS(ctx context.Context, listen, storeDir string, logger *slog.Logger) (*NATS, error) {
	if logger == nil {
		logger = slog.Default()
	}
	addr, host, port, err := splitListen("nats", listen, DefaultNATSListen)
	if err != nil {
		return nil, err
	}
	if storeDir == "" {
		return nil, errors.New("embedded nats: a JetStream store directory is required")
	}
	if port == 0 {
		port = server.RANDOM_PORT // nats-server reads 0 as its default, 4222
	}
	log := logger.With("component", "embedded-nats")
	if !isLoopback(host) {
		log.Warn("embedded NATS server listens beyond loopback and authenticates nobody: anyone who reaches it may publish and subscribe",
			"listen", addr)
	}
	srv, err := server.NewServer(&server.Options{
		ServerName: "uagate-embedded",
		Host:       host,
		Port:       port,
		JetStream:  true,
		StoreDir:   storeDir,
		NoSigs:     true,
	})
	if err != nil {
		return nil, fmt.Errorf("embedded nats: %w", err)
	}
	nl := &natsLogger{log: log}
	srv.SetLoggerV2(nl, false, false, false)

	started := make(chan struct{})
	go func() {
		defer close(started)
		srv.Start() // returns once it listens, or after logging why it cannot
	}()
	select {
	case <-started:
	case <-ctx.Done():
		srv.Shutdown()
		<-started
		srv.WaitForShutdown()
		return nil, fmt.Errorf("embedded nats: start: %w", ctx.Err())
	}
	fail := func(err error) (*NATS, error) {
		srv.Shutdown()
		srv.WaitForShutdown()
		return nil, err
	}
	if lerr, ferr := nl.failure(); ferr != nil {
		if lerr != nil {
			return fail(&ListenError{Part: "nats", Addr: addr, Err: lerr})
		}
		return fail(fmt.Errorf("embedded nats: %w", ferr))
	}
	wait := natsReadyTimeout
	if d, ok := ctx.Deadline(); ok {
		wait = time.Until(d)
	}
	if !srv.ReadyForConnections(wait) {
		return fail(fmt.Errorf("embedded nats: not ready for connections after %v", wait))
	}
	n := &NATS{srv: srv, addr: clientAddr(srv.Addr())}
	log.Info("embedded NATS server listening", "url", n.URL(), "jetstream", storeDir)
	return n, nil
}

// Addr is the host:port clients dial (loopback when listening on every
// interface).
func (n *NATS) Addr() string { return n.addr }

// URL is the server's URL for a NATS client: nats://host:port.
func (n *NATS) URL() string { return "nats://" + n.addr }

// Server is the running server, for what this package does not wrap
// (monitoring, in-process connections).
func (n *NATS) Server() *server.Server { return n.srv }

// Close shuts the server down (JetStream flushes its store) and waits for
// it. It may be called more than once.
func (n *NATS) Close() {
	n.closeOnce.Do(func() {
		n.srv.Shutdown()
		n.srv.WaitForShutdown()
	})
}

// natsLogger adapts nats-server's logger to slog, keeping warnings and
// above, and remembers the first fatal error: nats-server reports a failed
// start (a busy port, an unusable store) only through its log.
type natsLogger struct {
	log *slog.Logger

	mu       sync.Mutex
	fatal    error // first Fatalf, formatted
	fatalErr error // the first error among its arguments
}

func (l *natsLogger) Noticef(string, ...any) {}
func (l *natsLogger) Debugf(string, ...any)  {}
func (l *natsLogger) Tracef(string, ...any)  {}

func (l *natsLogger) Warnf(format string, v ...any) {
	if l.log.Enabled(context.Background(), slog.LevelWarn) {
		l.log.Warn(fmt.Sprintf(format, v...))
	}
}

func (l *natsLogger) Errorf(format string, v ...any) {
	if l.log.Enabled(context.Background(), slog.LevelError) {
		l.log.Error(fmt.Sprintf(format, v...))
	}
}

// Fatalf logs at error level; it does not exit (nats-server leaves that to
// its logger), the caller of StartNATS gets the error instead.
func (l *natsLogger) Fatalf(format string, v ...any) {
	msg := fmt.Sprintf(format, v...)
	l.log.Error(msg)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fatal != nil {
		return
	}
	l.fatal = errors.New(msg)
	for _, a := range v {
		if err, ok := a.(error); ok {
			l.fatalErr = err
			break
		}
	}
}

// failure returns the first fatal error: the listen error when it was one
// (its argument is the *net.OpError of the listen), and the message.
func (l *natsLogger) failure() (listen, fatal error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fatal == nil {
		return nil, nil
	}
	var oe *net.OpError
	if errors.As(l.fatalErr, &oe) && oe.Op == "listen" {
		return l.fatalErr, l.fatal
	}
	return nil, l.fatal
}
