package config

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/uagate/gateway/uastack/client"
	"github.com/uagate/gateway/uastack/pki"
	"github.com/uagate/gateway/uastack/server"
	"github.com/uagate/gateway/uastack/ua"
)

// startSim starts the simulation server on a loopback port chosen by the OS.
func startSim(t *testing.T, users map[string]string) *server.Server {
	t.Helper()
	srv, err := server.New(&server.Config{
		Address: "127.0.0.1:0",
		Users:   users,
		Logger:  slog.New(slog.DiscardHandler),
		Sim:     server.SimConfig{Folders: -1, AlarmSources: -1},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return srv
}

func TestClientConfigConnects(t *testing.T) {
	srv := startSim(t, map[string]string{"op": "s3cr3t-pw"})
	dir := t.TempDir()
	pwFile := filepath.Join(dir, "pw")
	os.WriteFile(pwFile, []byte("s3cr3t-pw\n"), 0o600)
	der, key, err := pki.CreateCertificate(pki.CertRequest{ApplicationURI: "urn:test:user", CommonName: "test user"}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile := filepath.Join(dir, "user.pem"), filepath.Join(dir, "user.key")
	os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	p8, _ := x509.MarshalPKCS8PrivateKey(key)
	os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: p8}), 0o600)

	for _, tc := range []struct {
		name string
		ep   Endpoint
		want ua.MessageSecurityMode
	}{
		{"none anonymous", Endpoint{SecurityPolicy: "None"}, ua.MessageSecurityModeNone},
		{"best, user from file", Endpoint{AutoAccept: true, Identity: Identity{Username: "op", Password: Secret{File: pwFile}}}, ua.MessageSecurityModeSignAndEncrypt},
		{"sign, x509 user", Endpoint{AutoAccept: true, SecurityPolicy: "Aes128_Sha256_RsaOaep", SecurityMode: "Sign",
			Identity: Identity{CertFile: certFile, KeyFile: keyFile}}, ua.MessageSecurityModeSign},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs strings.Builder
			cfg, err := ClientConfig(&tc.ep, filepath.Join(dir, "state"), slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Store == nil || cfg.Store.Dir() != filepath.Join(dir, "state", "pki") {
				t.Errorf("store %v, want <stateDir>/pki", cfg.Store)
			}
			if tc.ep.PKI != "" || tc.ep.SecurityPolicy == "best" {
				t.Errorf("the endpoint was modified: %+v", tc.ep)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			c, err := client.Dial(ctx, srv.URL(), cfg)
			if err != nil {
				t.Fatalf("dial: %v\n%s", err, logs.String())
			}
			defer c.Close()
			if c.SecurityMode() != tc.want {
				t.Errorf("mode %v, want %v", c.SecurityMode(), tc.want)
			}
			vals, err := c.ReadValues(ctx, ua.MustParseNodeID(server.NodeStep))
			if err != nil || vals[0].Status.IsBad() {
				t.Fatalf("read: %v %+v", err, vals)
			}
			if strings.Contains(logs.String(), "s3cr3t-pw") {
				t.Errorf("the password is in the logs")
			}
		})
	}
}

func TestClientConfigErrors(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name   string
		ep     Endpoint
		want   string
		config bool // a *config.Error
	}{
		{"policy", Endpoint{SecurityPolicy: "Basic512"}, `securityPolicy: "Basic512" is not a security policy`, true},
		{"mode", Endpoint{SecurityMode: "Encrypt"}, `securityMode: "Encrypt" is not a security mode`, true},
		{"deprecated", Endpoint{SecurityPolicy: "Basic128Rsa15"}, "securityPolicy: Basic128Rsa15 is deprecated; set allowDeprecated: true to use it", true},
		{"None with Sign", Endpoint{SecurityPolicy: "None", SecurityMode: "Sign"}, "securityMode: Sign does not go with securityPolicy None", true},
		{"password without user", Endpoint{Identity: Identity{Type: "username", Password: Secret{Value: "x"}}}, "identity.username: missing: type username needs a username", true},
		{"secret env missing", Endpoint{Identity: Identity{Username: "u", Password: Secret{Env: "UAGATE_TEST_NOT_SET_EVER"}}}, "identity.password: secret environment variable UAGATE_TEST_NOT_SET_EVER is not set", false},
		{"cert missing", Endpoint{Identity: Identity{CertFile: filepath.Join(dir, "no.pem"), KeyFile: filepath.Join(dir, "no.key")}}, "identity.certFile: open " + filepath.Join(dir, "no.pem") + ": no such file or directory", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ClientConfig(&tc.ep, dir, nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
			var ce *Error
			if errors.As(err, &ce) != tc.config {
				t.Errorf("*config.Error: %v, want %v", !tc.config, tc.config)
			}
		})
	}
}

func TestClientConfigSkipHostnameCheck(t *testing.T) {
	for _, skip := range []bool{false, true} {
		ep := Endpoint{Name: "plc", URL: "opc.tcp://127.0.0.1:4840", SecurityPolicy: "None", SkipHostnameCheck: skip}
		ep.applyDefaults(t.TempDir())
		cfg, err := ClientConfig(&ep, t.TempDir(), nil)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.SkipHostnameCheck != skip {
			t.Fatalf("skipHostnameCheck %v became client.Config.SkipHostnameCheck %v", skip, cfg.SkipHostnameCheck)
		}
	}
	c, _, err := parse([]byte("endpoints: [{name: plc, url: \"opc.tcp://10.1.2.3:4840\", skipHostnameCheck: true}]\n"), "c.yaml", noEnv, nil)
	if err != nil || !c.Endpoints[0].SkipHostnameCheck {
		t.Fatalf("the key does not load: %v", err)
	}
}
