// Command gateway is the OPC UA → PubSub/JSON gateway.
//
// Its subcommands (gateway help) parse flags, set up logging and signals, call
// the packages that do the work and print what they return.
package main

import (
	"context"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/uagate/gateway/internal/bench"
	"github.com/uagate/gateway/uastack/ua"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		args = []string{"run"} // the default run: embedded simulation server → JSON lines
	}
	// Ctrl-C ends a long browse cleanly: the session is closed on the way out.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	switch args[0] {
	case "version":
		fmt.Fprintln(stdout, "gateway", version)
	case "decode":
		err = cmdDecode(args[1:], stdin, stdout)
	case "browse":
		err = cmdBrowse(ctx, args[1:], stdout, stderr)
	case "read":
		err = cmdRead(ctx, args[1:], stdout, stderr)
	case "run":
		err = cmdRunGateway(ctx, args[1:], stdout, stderr)
	case "sim":
		err = cmdSim(ctx, args[1:], stdout, stderr)
	case "pki":
		err = cmdPKI(args[1:], stdout, stderr)
	case "status":
		err = cmdStatus(ctx, args[1:], stdout, stderr)
	case "nodes":
		err = cmdNodes(ctx, args[1:], stdout, stderr)
	case "check-config":
		err = cmdCheckConfig(args[1:], stdout, stderr)
	case "healthcheck":
		err = cmdHealthcheck(ctx, args[1:], stdout, stderr)
	case "bench":
		err = bench.Run(ctx, args[1:], stdout, stderr)
	case "bench-subscriber": // the counting subscriber of bench, in a process of its own
		err = bench.RunSubscriber(ctx, args[1:], stdin, stdout, stderr)
	case "help", "-h", "-help", "--help":
		usage(stdout)
	default:
		fmt.Fprintf(stderr, "gateway: unknown command %q\n\n", args[0])
		usage(stderr)
		return 2
	}
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errUsage), errors.Is(err, bench.ErrUsage): // both read "usage"
		fmt.Fprintln(stderr, "gateway:", strings.TrimPrefix(err.Error(), errUsage.Error()+": "))
		return 2
	default:
		fmt.Fprintln(stderr, "gateway:", err)
		return 1
	}
}

// errFlagParse classifies a flag parsing error: -h stays ErrHelp (exit 0), the
// rest are usage errors (flag has printed the details already).
func errFlagParse(err error) error {
	if errors.Is(err, flag.ErrHelp) {
		return err
	}
	return fmt.Errorf("%w: %v", errUsage, err)
}

func usage(w io.Writer) {
	fmt.Fprint(w, `gateway — OPC UA → PubSub/JSON gateway

Usage:
  gateway run [flags]          (also: gateway with no arguments) subscribe to OPC UA nodes
                               (default: an embedded simulation server) and print one ua-data
                               JSON NetworkMessage per line (gateway run -h)
  gateway version              print the version
  gateway decode [hex]         decode an OPC UA binary service message (NodeId-prefixed,
                               as hex on the command line or stdin) and print it
  gateway browse [flags] <endpoint> [node]
                               list the nodes below node (default: Objects); -depth N
                               descends N levels (0: all), -json prints JSON
  gateway read [flags] <endpoint> <node>...
                               read the values of nodes; -json prints JSON
  gateway sim [flags]          run the simulation OPC UA server (gateway sim -h)
  gateway status [-api URL]    endpoints, writer groups and sinks of a running gateway
  gateway nodes list|add|remove -group G -writer W [node ...]
                               change the nodes of a running gateway (REST API)
  gateway check-config [-skip-secrets] FILE
                               validate a configuration file (YAML or OPC Publisher's
                               publishednodes.json): warnings and a summary, or every error
  gateway healthcheck          GET /readyz of the gateway beside it: exit 0 when ready, 1 when
                               not (a container's HEALTHCHECK)
  gateway bench [flags]        end-to-end benchmark: simulation server → gateway (and the
                               gopcua baseline) → NATS → counting subscriber (gateway bench -h)
  gateway pki [-pki dir] list | trust <thumbprint>
                               list the certificate store; trust a rejected certificate

Connection flags of browse and read (see gateway <command> -h):
  -policy P -mode M            security policy and mode (default: the best offered)
  -user U                      UserName token; the password from $UAGATE_PASSWORD or -password
  -cert F -key F               X.509 user token
  -pki DIR                     certificate store (default ./pki); an unknown server
                               certificate is refused and saved to DIR/rejected/certs:
                               move it to DIR/trusted/certs to trust it
  -auto-accept                 trust unknown server certificates (development only)
`)
}

// cmdDecode decodes a NodeId-prefixed binary message, the body of an OPC UA MSG chunk.
func cmdDecode(args []string, stdin io.Reader, stdout io.Writer) error {
	fs := flag.NewFlagSet("decode", flag.ContinueOnError)
	if err := fs.Parse(args); err != nil {
		return err
	}
	var text string
	if fs.NArg() > 0 {
		text = strings.Join(fs.Args(), "")
	} else {
		b, err := io.ReadAll(io.LimitReader(stdin, 64<<20))
		if err != nil {
			return err
		}
		text = string(b)
	}
	text = strings.Map(func(r rune) rune {
		if strings.ContainsRune(" \t\r\n:", r) {
			return -1
		}
		return r
	}, text)
	b, err := hex.DecodeString(text)
	if err != nil {
		return fmt.Errorf("decode: input is not hex: %w", err)
	}
	if len(b) == 0 {
		return errors.New("decode: no input")
	}
	d := ua.NewDecoder(b, nil)
	msg, err := d.ReadStructure(nil)
	if err != nil {
		return fmt.Errorf("decode: %w", err)
	}
	fmt.Fprintf(stdout, "%T (%d bytes, %d unread)\n%+v\n", msg, len(b), d.Remaining(), msg)
	return nil
}
