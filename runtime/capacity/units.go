package capacity

// Byte sizes.
const (
	KiB = 1024.0
	MiB = 1024 * KiB
	GiB = 1024 * MiB
	GB  = 1e9
)
