// Command gateway is the OPC UA → PubSub/JSON gateway.
//
// Subcommands grow with the project; today: version, decode.
package main

import (
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/uagate/gateway/uastack/ua"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stdout)
		return 0
	}
	var err error
	switch args[0] {
	case "version":
		fmt.Fprintln(stdout, "gateway", version)
	case "decode":
		err = cmdDecode(args[1:], stdin, stdout)
	case "help", "-h", "-help", "--help":
		usage(stdout)
	default:
		fmt.Fprintf(stderr, "gateway: unknown command %q\n\n", args[0])
		usage(stderr)
		return 2
	}
	if err != nil {
		fmt.Fprintln(stderr, "gateway:", err)
		return 1
	}
	return 0
}

func usage(w io.Writer) {
	fmt.Fprint(w, `gateway — OPC UA → PubSub/JSON gateway

Usage:
  gateway version              print the version
  gateway decode [hex]         decode an OPC UA binary service message (NodeId-prefixed,
                               as hex on the command line or stdin) and print it
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
