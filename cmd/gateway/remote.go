package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/uagate/gateway/api/cli"
)

// apiTokenEnv holds the API key of the remote commands, so that it need not
// show in the process list.
const apiTokenEnv = "UAGATE_API_TOKEN"

// remoteFlags are the flags of the commands that talk to a running gateway.
type remoteFlags struct {
	url, token string
}

func (f *remoteFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.url, "api", "http://127.0.0.1:8080", "base `URL` of the running gateway's HTTP listener")
	fs.StringVar(&f.token, "token", "", "API key (default $"+apiTokenEnv+")")
}

func (f *remoteFlags) key() string {
	if f.token != "" {
		return f.token
	}
	return os.Getenv(apiTokenEnv)
}

// cmdStatus prints a running gateway's endpoints, writer groups and sinks.
func cmdStatus(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("status", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var r remoteFlags
	r.register(fs)
	if err := fs.Parse(args); err != nil {
		return errFlagParse(err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: status takes no arguments, got %q", errUsage, fs.Args())
	}
	return cli.Status(ctx, r.url, r.key(), stdout)
}

// cmdNodes lists, adds or removes the fields (nodes) of a dataset writer of a
// running gateway.
func cmdNodes(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("nodes", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var r remoteFlags
	r.register(fs)
	group := fs.String("group", "", "writer `group` (required)")
	writer := fs.String("writer", "", "dataset `writer` (required; add creates it when missing)")
	file := fs.String("file", "", "add/remove: read the nodes from `file` too, one a line (# comments)")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: gateway nodes list|add|remove -group G -writer W [flags] [node ...]

Lists, adds or removes the nodes (fields) of a dataset writer of a running
gateway through its REST API. add takes node ids or name=nodeid; remove takes
field names (also from -file, one a line). A change is one request, applied
at once — all of it or none — and saved.

Flags:
`)
		fs.PrintDefaults()
	}
	if len(args) == 0 {
		fs.Usage()
		return fmt.Errorf("%w: nodes needs list, add or remove", errUsage)
	}
	verb := args[0]
	pos, err := parseInterspersed(fs, args[1:])
	if err != nil {
		return errFlagParse(err)
	}
	if *file != "" {
		b, err := os.ReadFile(*file)
		if err != nil {
			return fmt.Errorf("%w: -file: %v", errUsage, err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
				pos = append(pos, line)
			}
		}
	}
	if *group == "" || *writer == "" {
		return fmt.Errorf("%w: nodes %s needs -group and -writer", errUsage, verb)
	}
	switch verb {
	case "list":
		if len(pos) > 0 {
			return fmt.Errorf("%w: nodes list takes no nodes", errUsage)
		}
		return cli.NodesList(ctx, r.url, r.key(), *group, *writer, stdout)
	case "add", "remove":
		if len(pos) == 0 {
			return fmt.Errorf("%w: nodes %s needs at least one node", errUsage, verb)
		}
		if verb == "add" {
			// The gateway answers once the monitored items exist: for many
			// nodes that takes a while, so show that it is under way.
			stop := showWaiting(stderr, len(pos))
			err := cli.NodesAdd(ctx, r.url, r.key(), *group, *writer, pos, stdout)
			stop()
			return err
		}
		return cli.NodesRemove(ctx, r.url, r.key(), *group, *writer, pos, stdout)
	}
	return fmt.Errorf("%w: nodes %q: want list, add or remove", errUsage, verb)
}

// showWaiting shows, on a terminal and for at least waitingFrom nodes, how
// long the gateway has been creating them; the returned func ends it.
func showWaiting(stderr io.Writer, n int) (stop func()) {
	p := newProgress(stderr)
	if !p.tty || n < waitingFrom {
		return func() {}
	}
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		start := time.Now()
		t := time.NewTicker(progressRedraw)
		defer t.Stop()
		for {
			p.update(false, "nodes add: %d nodes sent; the gateway is subscribing to them (%s)", n, time.Since(start).Round(time.Second))
			select {
			case <-done:
				p.done("nodes add: %d nodes answered after %s", n, time.Since(start).Round(100*time.Millisecond))
				return
			case <-t.C:
			}
		}
	}()
	return func() { close(done); <-finished }
}

// waitingFrom is the number of nodes from which nodes add shows its wait.
const waitingFrom = 1000
