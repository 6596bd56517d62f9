// Package config is the gateway's configuration: the model (model.go), its
// loading from YAML (or a registered Format: OPC Publisher's
// publishednodes.json, package publishednodes) with environment overrides,
// defaults, validation with precise errors (file, line, field, why), the
// mapping of an endpoint to a client.Config, the difference between
// two configurations that a reload applies, and the expansion of browse
// selections into fields. The README's Configuration section documents every key.
//
//	c, warnings, err := config.Load("gateway.yaml") // defaults applied, secrets resolved, validated
//	// err: *config.Error, every problem one per line:
//	//   gateway.yaml:12:9: writerGroups[0].writers[1].fields[3].node: "ns=x" is not a node id (…)
//	ccfg, err := config.ClientConfig(&c.Endpoints[0], c.Gateway.StateDir, logger)
//	done, err := config.Watch(ctx, "gateway.yaml", onConfig, onError)
//	changes := config.Diff(old, new)
//
// What lives here:
//
//   - model.go: the types; values.go: Secret (never printed) and Duration;
//     delivery.go: the sinks' delivery vocabulary (Guarantee, Policy),
//     which package sink takes from here;
//   - decode.go: the YAML AST (goccy/go-yaml's parser) walked into the model,
//     strictly, collecting every error and every setting's position;
//   - load.go: Load, Parse, the UAGATE_ environment overrides, String;
//   - defaults.go: Default, ApplyDefaults (the embedded parts included),
//     WriterGroup.ApplyDefaults: the one table of defaults, which the
//     pipeline (package bridge) takes as applied;
//   - validate.go: Validate, one rule per message, and the limits;
//   - format.go: RegisterFormat, for formats that map onto the model from
//     above this package (bridge/config/publishednodes registers OPC
//     Publisher's when imported);
//   - client.go: ClientConfig, the endpoint → client.Config path that flags,
//     files and check-config share;
//   - diff.go, watch.go: Diff and Watch for reloads;
//   - browse.go: ExpandBrowse, BrowseSelect → fields; ExpandWriterGroup, a
//     writer group's selections → its fields, the one place they are
//     expanded.
//
// A *Config is plain data: not safe for concurrent modification, safe to
// share read-only once loaded. Load and Parse return a new one each time;
// Watch's callbacks get a new one per change, on Watch's goroutine.
package config
