// Package sparkplugpb is the Sparkplug B payload as protoc-gen-go generates
// it from sparkplug_b.proto, the definition of the Eclipse Tahu project
// (github.com/eclipse/tahu, sparkplug_b/sparkplug_b.proto at commit
// 46f25e79f34234e6145d11108660dfd9133ae50d), copied unchanged under the
// Eclipse Public License 2.0 (its notice heads the file; the licence text is
// LICENSE).
//
// The gateway encodes its payloads with protowire on the hot path
// (package sparkplug); these types decode them in the tests, the way a
// Sparkplug host application would, and decode the commands (NCMD, DCMD)
// the node receives.
//
// Regenerate with go generate (gen.sh: protoc from Debian's
// protobuf-compiler, protoc-gen-go of the protobuf module go.mod names);
// TestGeneratedUpToDate checks that the committed file is what it makes.
package sparkplugpb

//go:generate sh gen.sh
