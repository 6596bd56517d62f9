module github.com/uagate/gateway

go 1.26.0

require (
	github.com/eclipse/paho.mqtt.golang v1.5.1
	github.com/goccy/go-json v0.10.5
	github.com/gopcua/opcua v0.8.0
	github.com/valyala/bytebufferpool v1.0.0
)

require (
	github.com/gorilla/websocket v1.5.3 // indirect
	golang.org/x/net v0.58.0 // indirect
	golang.org/x/sync v0.17.0 // indirect
)
