package embedded

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"syscall"
)

// Default listen addresses: loopback only, because the embedded servers let
// every client in.
const (
	DefaultMQTTListen = "127.0.0.1:1883"
	DefaultNATSListen = "127.0.0.1:4222"
)

// ListenError is a failure to listen on an embedded server's configured
// address. Its message names the settings that fix it:
//
//	embedded mqtt: listen 127.0.0.1:1883: address already in use (set embedded.mqtt.listen or embedded.mqtt.enabled: false)
type ListenError struct {
	Part string // "mqtt" or "nats": the key under embedded
	Addr string // as configured
	Err  error
}

func (e *ListenError) Error() string {
	return fmt.Sprintf("embedded %s: listen %s: %s (set embedded.%s.listen or embedded.%s.enabled: false)",
		e.Part, e.Addr, reason(e.Err), e.Part, e.Part)
}

func (e *ListenError) Unwrap() error { return e.Err }

// reason is the heart of a listen error, without the "listen tcp …: bind:"
// that repeats the address.
func reason(err error) string {
	switch {
	case errors.Is(err, syscall.EADDRINUSE):
		return "address already in use"
	case errors.Is(err, syscall.EACCES):
		return "permission denied"
	case errors.Is(err, syscall.EADDRNOTAVAIL):
		return "address not available on this machine"
	}
	var se *os.SyscallError
	if errors.As(err, &se) {
		return se.Err.Error()
	}
	return err.Error()
}

// splitListen checks a host:port (def when empty) and returns its parts.
func splitListen(part, listen, def string) (addr, host string, port int, err error) {
	if listen == "" {
		listen = def
	}
	host, p, err := net.SplitHostPort(listen)
	if err == nil {
		port, err = net.LookupPort("tcp", p)
	}
	if err != nil {
		return "", "", 0, &ListenError{Part: part, Addr: listen, Err: fmt.Errorf("want host:port: %w", err)}
	}
	return listen, host, port, nil
}

// isLoopback reports whether host names only this machine.
func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// clientAddr is the address a local client dials for a listener's address:
// 127.0.0.1 instead of an unspecified IP (0.0.0.0 and :: listen on both
// families in Go, and Addr reports [::] for either).
func clientAddr(a net.Addr) string {
	tcp, ok := a.(*net.TCPAddr)
	if !ok {
		return a.String()
	}
	ip := tcp.IP
	if ip == nil || ip.IsUnspecified() {
		ip = net.IPv4(127, 0, 0, 1)
	}
	return net.JoinHostPort(ip.String(), fmt.Sprint(tcp.Port))
}

// minLevel is a slog.Handler that drops records below a level: the embedded
// servers log their routine at Info and below, which is noise in the
// gateway's log.
type minLevel struct {
	min slog.Level
	h   slog.Handler
}

func (m minLevel) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= m.min && m.h.Enabled(ctx, l)
}

func (m minLevel) Handle(ctx context.Context, r slog.Record) error { return m.h.Handle(ctx, r) }

func (m minLevel) WithAttrs(as []slog.Attr) slog.Handler {
	return minLevel{m.min, m.h.WithAttrs(as)}
}

func (m minLevel) WithGroup(name string) slog.Handler {
	return minLevel{m.min, m.h.WithGroup(name)}
}

func warnOnly(l *slog.Logger) *slog.Logger {
	if l == nil {
		l = slog.Default()
	}
	return slog.New(minLevel{slog.LevelWarn, l.Handler()})
}
