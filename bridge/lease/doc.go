// Package lease keeps what a writer group needs to resume its subscription
// after a restart or on another replica (bridge.ResumeStore), and shares the
// writer groups among replicas.
//
//   - FileStore (file.go): one JSON file per writer group in the state
//     directory, written atomically (temporary file, fsync, rename).
//
// Ownership: a store keeps nothing of the records it is given.
package lease
