module github.com/uagate/gateway

go 1.26.0

require (
	github.com/goccy/go-json v0.10.5
	github.com/goccy/go-yaml v1.19.2
	github.com/gopcua/opcua v0.8.0
	github.com/nats-io/nats.go v1.55.0
	github.com/valyala/bytebufferpool v1.0.0
)

require (
	github.com/klauspost/compress v1.20.0 // indirect
	github.com/nats-io/nkeys v0.4.16 // indirect
	github.com/nats-io/nuid v1.0.1 // indirect
	golang.org/x/crypto v0.57.0 // indirect
	golang.org/x/sys v0.48.0 // indirect
)
