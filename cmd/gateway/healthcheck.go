package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"time"
)

// cmdHealthcheck asks the gateway running beside it whether it is ready
// (GET /readyz) and exits 0 when it is, 1 when not: a container's
// HEALTHCHECK in an image without a shell or curl.
func cmdHealthcheck(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("healthcheck", flag.ContinueOnError)
	fs.SetOutput(stderr)
	url := fs.String("url", "", "the `URL` to ask; default http://127.0.0.1:<port of $UAGATE_HTTP_LISTEN>/readyz")
	path := fs.String("path", "/readyz", "the `path` to ask (/healthz: alive, whether or not ready)")
	timeout := fs.Duration("timeout", 5*time.Second, "bound of the request")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), "Usage: gateway healthcheck [-url URL] [-path /readyz|/healthz]\n\nExits 0 when the gateway answers 200, 1 otherwise.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if _, err := parseInterspersed(fs, args); err != nil {
		return errFlagParse(err)
	}
	u := *url
	if u == "" {
		_, port, err := net.SplitHostPort(cmp.Or(os.Getenv("UAGATE_HTTP_LISTEN"), "127.0.0.1:8080"))
		if err != nil {
			return fmt.Errorf("UAGATE_HTTP_LISTEN: %w", err)
		}
		u = "http://" + net.JoinHostPort("127.0.0.1", port) + *path
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("not healthy: %w", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("not healthy: %s answered %s: %s", u, resp.Status, body)
	}
	fmt.Fprintf(stdout, "healthy: %s\n", body)
	return nil
}
