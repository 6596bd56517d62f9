module github.com/uagate/gateway

go 1.26

require (
	github.com/fsnotify/fsnotify v1.10.1
	github.com/goccy/go-json v0.10.5
	github.com/goccy/go-yaml v1.19.2
	github.com/gopcua/opcua v0.8.0
	github.com/valyala/bytebufferpool v1.0.0
)

require golang.org/x/sys v0.28.0 // indirect
