// Package jsonscan walks JSON without decoding it: it iterates an object's
// members and an array's elements as raw byte spans, skips any value, and
// reports malformed input, allocating nothing. It exists for the hot paths
// that look at a few fields of every engine event, where encoding/json's
// reflection and copies cost more than the relay itself.
//
// Keys are compared by the caller exactly as written, with no case folding
// and no unescaping: a caller that meets a key with an escape, or one that
// encoding/json would fold onto a field it knows (see Plain and Folds),
// should hand the input to encoding/json instead. Nesting deeper than
// MaxDepth is reported as malformed for the same reason: the caller falls
// back, and encoding/json gives the exact answer.
package jsonscan
