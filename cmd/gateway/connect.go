package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/uagate/gateway/bridge/config"
	"github.com/uagate/gateway/uastack/client"
)

// passwordEnv is read when -user is given without -password, so the password need
// not show in the process list.
const passwordEnv = "UAGATE_PASSWORD"

// errUsage marks errors in the command line: the exit code is 2, not 1.
var errUsage = errors.New("usage")

// connFlags are the flags of every command that connects to an OPC UA server.
type connFlags struct {
	policy, mode      string
	user, password    string
	certFile, keyFile string
	pkiDir            string
	autoAccept        bool
	allowDeprecated   bool
	skipHostname      bool
	timeout           time.Duration
	verbose           bool
}

func (f *connFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.policy, "policy", "", "security `policy`: None, Basic256Sha256, Aes128_Sha256_RsaOaep, Aes256_Sha256_RsaPss,\nBasic128Rsa15, Basic256 (deprecated), or a full policy URI; default: the best the server offers")
	fs.StringVar(&f.mode, "mode", "", "security `mode`: None, Sign or SignAndEncrypt; default: the best for the policy")
	fs.StringVar(&f.user, "user", "", "user `name` for a UserName token (password from -password or $"+passwordEnv+")")
	fs.StringVar(&f.password, "password", "", "`password` for -user (visible in the process list: prefer $"+passwordEnv+")")
	fs.StringVar(&f.certFile, "cert", "", "X.509 user certificate `file` (DER or PEM), with -key")
	fs.StringVar(&f.keyFile, "key", "", "private key `file` (PEM, PKCS#1 or PKCS#8) of -cert")
	fs.StringVar(&f.pkiDir, "pki", defaultPKIDir(), "certificate store `dir`ectory (own, trusted, rejected certificates); default the one `gateway run` uses")
	fs.BoolVar(&f.autoAccept, "auto-accept", false, "trust unknown server certificates (development only)")
	fs.BoolVar(&f.allowDeprecated, "allow-deprecated", false, "allow the deprecated policies Basic128Rsa15 and Basic256")
	fs.BoolVar(&f.skipHostname, "skip-hostname-check", false, "accept a server certificate that does not name the host of the endpoint URL")
	fs.DurationVar(&f.timeout, "timeout", 30*time.Second, "time limit for connecting and for each request")
	fs.BoolVar(&f.verbose, "v", false, "log the details of connecting")
}

// endpoint is the flags as a configuration endpoint. The checks here are the
// ones only flags can get wrong (their messages name the flags); the rest is
// validated by config.ClientConfig, the path the configuration file takes too.
func (f *connFlags) endpoint() (config.Endpoint, error) {
	ep := config.Endpoint{
		SecurityPolicy:    f.policy,
		SecurityMode:      f.mode,
		PKI:               f.pkiDir,
		AutoAccept:        f.autoAccept,
		AllowDeprecated:   f.allowDeprecated,
		SkipHostnameCheck: f.skipHostname,
		RequestTimeout:    config.Duration(f.timeout),
	}
	switch {
	case f.user != "" && f.certFile != "":
		return ep, fmt.Errorf("%w: -user and -cert exclude each other", errUsage)
	case f.user != "":
		pw := f.password
		if pw == "" {
			pw = os.Getenv(passwordEnv)
		}
		ep.Identity = config.Identity{Type: config.IdentityUsername, Username: f.user, Password: config.Secret{Value: pw}}
	case f.certFile != "" || f.keyFile != "":
		if f.certFile == "" || f.keyFile == "" {
			return ep, fmt.Errorf("%w: -cert and -key go together", errUsage)
		}
		ep.Identity = config.Identity{Type: config.IdentityX509, CertFile: f.certFile, KeyFile: f.keyFile}
	case f.password != "":
		return ep, fmt.Errorf("%w: -password needs -user", errUsage)
	}
	if f.timeout <= 0 {
		return ep, fmt.Errorf("%w: -timeout must be positive, got %v", errUsage, f.timeout)
	}
	return ep, nil
}

// config builds the client configuration. Secrets stay out of the logs: only the
// identity's description is ever printed.
func (f *connFlags) config(stderr io.Writer) (*client.Config, error) {
	level := slog.LevelWarn
	if f.verbose {
		level = slog.LevelDebug
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	ep, err := f.endpoint()
	if err != nil {
		return nil, err
	}
	cfg, err := config.ClientConfig(&ep, "", logger)
	if err != nil {
		if issues := config.Issues(err); issues != nil {
			// A setting that cannot work: name the flag it came from.
			msgs := make([]string, len(issues))
			for i, is := range issues {
				msgs[i] = flagOf(is.Path) + is.Message
			}
			return nil, fmt.Errorf("%w: %s", errUsage, strings.Join(msgs, "; "))
		}
		return nil, err
	}
	return cfg, nil
}

// flagOf names the flag behind an endpoint setting, for messages.
func flagOf(path string) string {
	switch path {
	case "":
		return ""
	case "securityPolicy":
		return "-policy: "
	case "securityMode":
		return "-mode: "
	case "requestTimeout":
		return "-timeout: "
	case "pki":
		return "-pki: "
	}
	if strings.HasPrefix(path, "identity") {
		return "-user/-cert: "
	}
	return path + ": "
}

// dial connects with the flags' configuration within -timeout.
func (f *connFlags) dial(ctx context.Context, endpoint string, stderr io.Writer) (*client.Client, error) {
	cfg, err := f.config(stderr)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	return client.Dial(ctx, endpoint, cfg)
}

// parseInterspersed parses flags that may come before, between and after the
// positional arguments ("gateway read opc.tcp://… -json ns=1;s=X").
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		// flag stops at "--": everything after it is positional.
		if i := len(args) - len(rest); i > 0 && args[i-1] == "--" {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// defaultPKIDir is the certificate store `gateway run` uses by default:
// <stateDir>/pki, the state directory from $UAGATE_STATE_DIR as for run.
func defaultPKIDir() string {
	return filepath.Join(cmp.Or(os.Getenv("UAGATE_STATE_DIR"), config.DefaultStateDir), "pki")
}
