// Package sparkplug is the Sparkplug B 3.0 mode of an MQTT sink: the gateway
// as a Sparkplug Edge Node.
//
// # Encoding
//
// Payloads are Sparkplug B protobuf (sparkplug_b.proto of Eclipse Tahu, its
// generated code in sparkplugpb), written with protowire straight into
// reused buffers (encode.go): no message structs, nothing allocated for the
// numeric, Boolean, String, DateTime, StatusCode and Guid values and their
// arrays. OPC UA built-in types map to Sparkplug datatypes as datatype.go's
// table says; a Bad status makes a metric is_null with the Quality (0) and
// StatusCode properties, an Uncertain one keeps its value and adds them; a
// metric's timestamp is its value's source timestamp (else the server's).
package sparkplug
