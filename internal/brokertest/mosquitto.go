package brokertest

import (
	"fmt"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"
	"testing"
)

// MosquittoOptions configure a test mosquitto.
type MosquittoOptions struct {
	// Users, when not nil, switches anonymous access off and allows these
	// user → password pairs (a mosquitto_passwd file).
	Users map[string]string
	// Persistence keeps sessions and queued messages across Stop/Start in
	// the test's directory (written at Stop; Kill loses what came since).
	Persistence bool
	// TLS makes the listener TLS only (URL ssl://…) with these files; with
	// RequireClientCert a client must present a certificate of TLS.CA.
	TLS               *TLSFiles
	RequireClientCert bool
	// MaxPacketSize, when positive, is the largest packet the broker takes
	// (mosquitto's max_packet_size; announced to MQTT 5 clients in the
	// CONNACK).
	MaxPacketSize int
	// ACL, when set, is the text of an acl_file: what each client may
	// read and write (its first topic lines apply to anonymous clients;
	// what no line grants is denied: a denied QoS 1 PUBLISH of an MQTT 5
	// client is answered with reason code 0x87, Not authorized).
	ACL string
}

// Mosquitto is a mosquitto broker on a loopback port.
type Mosquitto struct {
	*process
	opts      MosquittoOptions
	dir       string
	passwd    string
	passwdBin string
}

// StartMosquitto starts mosquitto with a generated configuration and waits
// until it accepts connections.
func StartMosquitto(t testing.TB, opts MosquittoOptions) *Mosquitto {
	t.Helper()
	m := &Mosquitto{opts: opts, dir: t.TempDir()}
	bin := binary(t, "mosquitto")
	port := freePort(t)
	conf := filepath.Join(m.dir, "mosquitto.conf")
	var b strings.Builder
	fmt.Fprintf(&b, "listener %d 127.0.0.1\n", port)
	if opts.TLS != nil {
		fmt.Fprintf(&b, "cafile %s\ncertfile %s\nkeyfile %s\n", opts.TLS.CA, opts.TLS.ServerCert, opts.TLS.ServerKey)
		if opts.RequireClientCert {
			// The client certificate's CN becomes the user name.
			b.WriteString("require_certificate true\nuse_identity_as_username true\n")
		}
	}
	if u, err := user.Current(); err == nil {
		// Started as root, mosquitto switches to the user "mosquitto", which
		// cannot read the test's directory: stay who we are.
		fmt.Fprintf(&b, "user %s\n", u.Username)
	}
	b.WriteString("log_dest stderr\nlog_type error\nlog_type warning\nlog_type notice\nlog_type information\n")
	b.WriteString("max_queued_messages 0\nmax_inflight_messages 0\n")
	if opts.MaxPacketSize > 0 {
		fmt.Fprintf(&b, "max_packet_size %d\n", opts.MaxPacketSize)
	}
	if opts.ACL != "" {
		acl := filepath.Join(m.dir, "acl")
		writeFile(t, acl, opts.ACL)
		fmt.Fprintf(&b, "acl_file %s\n", acl)
	}
	if opts.Persistence {
		fmt.Fprintf(&b, "persistence true\npersistence_location %s/\nautosave_interval 1\n", m.dir)
	}
	if opts.Users != nil {
		m.passwdBin = binary(t, "mosquitto_passwd")
		m.passwd = filepath.Join(m.dir, "passwd")
		m.writeUsers(t, opts.Users)
		fmt.Fprintf(&b, "allow_anonymous false\npassword_file %s\n", m.passwd)
	} else {
		b.WriteString("allow_anonymous true\n")
	}
	writeFile(t, conf, b.String())
	m.process = newProcess(t, "mosquitto", bin, port, func() []string { return []string{"-c", conf} })
	m.Start()
	return m
}

// URL is tcp://127.0.0.1:port, or ssl://127.0.0.1:port with TLS.
func (m *Mosquitto) URL() string {
	if m.opts.TLS != nil {
		return "ssl://" + m.Addr()
	}
	return "tcp://" + m.Addr()
}

func (m *Mosquitto) writeUsers(t testing.TB, users map[string]string) {
	t.Helper()
	writeFile(t, m.passwd, "")
	for u, pw := range users {
		if out, err := exec.Command(m.passwdBin, "-b", m.passwd, u, pw).CombinedOutput(); err != nil {
			t.Fatalf("brokertest: mosquitto_passwd: %v: %s", err, out)
		}
	}
}

// SetUsers replaces the allowed users and makes the running broker reload
// them (SIGHUP). Only for a broker started with Users.
func (m *Mosquitto) SetUsers(t testing.TB, users map[string]string) {
	t.Helper()
	if m.passwd == "" {
		t.Fatal("brokertest: SetUsers on a mosquitto started without Users")
	}
	m.writeUsers(t, users)
	if err := m.reload(); err != nil {
		t.Fatalf("brokertest: reload mosquitto: %v", err)
	}
}
