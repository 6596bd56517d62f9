// Package config is the gateway's configuration: the model (model.go), its
// loading from YAML or OPC Publisher's publishednodes.json with environment
// overrides, defaults, validation with precise errors (file, line, field,
// why), the mapping of an endpoint to a client.Config, and the difference
// between two configurations that a reload applies.
package config
