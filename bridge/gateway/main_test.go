package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"testing"
	"time"

	"github.com/uagate/gateway/bridge/config"
	"github.com/uagate/gateway/bridge/gateway"
	"github.com/uagate/gateway/uastack/server"
	"github.com/uagate/gateway/uastack/ua"
	"github.com/uagate/gateway/uastack/uasc"
)

// nonePolicy is the one endpoint of the simulation servers these tests run.
var nonePolicy = []uasc.EndpointSecurity{{PolicyURI: uasc.SecurityPolicyNone, Mode: ua.MessageSecurityModeNone}}

// gatewayChildEnv makes this test binary a gateway running the configuration
// file the variable names (startGatewayChild), as `gateway run -config FILE`
// does, until SIGTERM or SIGINT.
const gatewayChildEnv = "UAGATE_TEST_GATEWAY_CONFIG"

// simChildEnv makes this test binary a simulation server (startSimChild):
// the variable holds its server.SimConfig as JSON.
const simChildEnv = "UAGATE_TEST_SIM_CONFIG"

// simChildReady starts the line a simulation server child prints with its URL.
const simChildReady = "sim child: listening on "

func TestMain(m *testing.M) {
	if conf := os.Getenv(natsChildEnv); conf != "" {
		os.Exit(runNATSChild(conf))
	}
	if conf := os.Getenv(simChildEnv); conf != "" {
		os.Exit(runSimChild(conf))
	}
	if path := os.Getenv(gatewayChildEnv); path != "" {
		os.Exit(runGatewayChild(path))
	}
	// The gateways these tests run in this process would set the
	// collector's GOGC to its steady value after their setup (memory.go),
	// for the whole test binary, whose heap is small and whose tests
	// allocate a lot: thousands of collections more.
	// TestMemReleaserGCPercent checks that setting on its own.
	if os.Getenv("GOGC") == "" {
		os.Setenv("GOGC", "100")
	}
	os.Exit(m.Run())
}

// runSimChild is a simulation server child's whole life, until interrupted.
func runSimChild(conf string) int {
	var sim server.SimConfig
	if err := json.Unmarshal([]byte(conf), &sim); err != nil {
		fmt.Fprintln(os.Stderr, "sim child:", err)
		return 2
	}
	srv, err := server.New(&server.Config{
		Address:  "127.0.0.1:0",
		Policies: nonePolicy,
		Sim:      sim,
	})
	if err == nil {
		err = srv.Start()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "sim child:", err)
		return 1
	}
	fmt.Println(simChildReady + srv.URL())
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt)
	<-sig
	srv.Close()
	return 0
}

// runGatewayChild is a gateway child's whole life: the configuration file at
// path loaded, started and watched, stopped within its shutdownTimeout on
// SIGTERM or SIGINT, or with exit code 3 when the gateway ends serving
// (Gateway.Fatal). It logs to stderr.
func runGatewayChild(path string) int {
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	cfg, _, err := config.Load(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, "gateway child:", err)
		return 2
	}
	gw, err := gateway.New(cfg, gateway.Options{Logger: log, SavePath: path})
	if err == nil {
		err = gw.Start(context.Background())
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "gateway child:", err)
		return 1
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := gw.Watch(ctx, path); err != nil {
		log.Warn("configuration file not watched", "err", err)
	}
	code := 0
	select {
	case <-sig:
	case err := <-gw.Fatal():
		log.Error("gateway child: serving ended", "err", err)
		code = 3
	}
	log.Info("stopping", "timeout", cfg.Gateway.ShutdownTimeout.D())
	sctx, scancel := context.WithTimeout(context.Background(), cfg.Gateway.ShutdownTimeout.D())
	defer scancel()
	start := time.Now()
	if err := gw.Stop(sctx); err != nil {
		log.Warn("stopped at the shutdown timeout", "err", err, "took", time.Since(start))
	}
	return code
}
