package main

import (
	"flag"
	"fmt"
	"io"

	"github.com/uagate/gateway/bridge/config"
)

// cmdCheckConfig loads and validates a configuration file without running it:
// the warnings and a summary on stdout, exit 0; or every error on stderr,
// exit 2.
func cmdCheckConfig(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("check-config", flag.ContinueOnError)
	fs.SetOutput(stderr)
	skip := fs.Bool("skip-secrets", false, "do not read the secrets' files and variables (they exist only where the gateway runs: a pod's mounts)")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: gateway check-config [-skip-secrets] FILE

Loads FILE (YAML, or OPC Publisher's publishednodes.json) with the UAGATE_
environment overrides and the defaults, resolves its secrets (unless
-skip-secrets) and validates it. Prints the warnings and a summary and exits
0, or prints every error (file, line, field, reason) and exits 2.
`)
		fs.PrintDefaults()
	}
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return errFlagParse(err)
	}
	if len(pos) != 1 {
		fs.Usage()
		return fmt.Errorf("%w: check-config needs one file", errUsage)
	}
	c, warns, err := config.LoadWith(pos[0], config.LoadOptions{SkipSecrets: *skip})
	for _, w := range warns {
		fmt.Fprintln(stdout, "warning:", w)
	}
	if err != nil {
		return configError(err, "check-config: "+pos[0], stderr)
	}
	var writers, fields, browse int
	for _, g := range c.WriterGroups {
		writers += len(g.Writers)
		for _, w := range g.Writers {
			fields += len(w.Fields)
			browse += len(w.Browse)
		}
	}
	sinks := len(c.Sinks.MQTT) + len(c.Sinks.NATS) + len(c.Sinks.File)
	if c.Sinks.WebSocket != nil {
		sinks++
	}
	fmt.Fprintf(stdout, "ok: %d endpoints, %d writer groups, %d writers, %d fields, %d sinks", len(c.Endpoints), len(c.WriterGroups), writers, fields, sinks)
	if browse > 0 {
		fmt.Fprintf(stdout, " (and %d browse selections, expanded when the writers start)", browse)
	}
	fmt.Fprintln(stdout)
	return nil
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
