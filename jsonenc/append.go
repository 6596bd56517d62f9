package jsonenc

import "github.com/uagate/gateway/uastack/ua"

// Append runs write on a pooled Encoder with opts and appends the JSON it
// produced to dst: a convenience for REST handlers and tests that want a
// []byte they own. It allocates only when dst must grow.
func Append(dst []byte, opts Options, write func(e *Encoder)) ([]byte, error) {
	e := NewEncoder(nil, opts)
	defer e.Release()
	write(e)
	if err := e.Err(); err != nil {
		return dst, err
	}
	return append(dst, e.Bytes()...), nil
}

// AppendVariant appends v as OPC UA JSON in opts.Mode.
func AppendVariant(dst []byte, v *ua.Variant, opts Options) ([]byte, error) {
	return Append(dst, opts, func(e *Encoder) { e.WriteVariant(v) })
}

// AppendDataValue appends dv as OPC UA JSON in opts.Mode.
func AppendDataValue(dst []byte, dv *ua.DataValue, opts Options) ([]byte, error) {
	return Append(dst, opts, func(e *Encoder) { e.WriteDataValue(dv) })
}
