// Package modelsync copies one revision of a model's weights from S3 to
// the node's local disk: the model pods' init container. The copy is
// parallel over files and resumable (a file interrupted mid-way goes on
// from its last byte, and a whole file left by an interrupted run is
// checked rather than fetched again), every file is checked against its
// size and, where S3 has one, its MD5 ETag, and a marker written last
// makes a second pod on the same node start without copying at all.
//
// Syncs of one revision into one cache folder take turns: each takes an
// exclusive lock (flock) on the revision's ".llmplat-lock" before it
// copies, so replicas of a model started together on one node, in any
// number of pods or goroutines, never write the same partial copy or
// marker. The first copies; the others wait (polling every lockPoll, for
// as long as their context allows), then find its marker and read
// nothing from S3. The lock dies with the process that holds it, so a
// crashed copy never leaves the revision locked; the file stays.
//
// A sync then stamps its revision used (".llmplat-used", under the lock)
// and cleans the model's other revisions: it removes those neither among
// the KeepRevisions most recently used (counting its own) nor used within
// KeepUnused. It takes each one's lock without waiting, so a revision
// another sync is copying or starting a pod on is skipped, looks at its
// stamp again under the lock, and moves it to a ".llmplat-removing-" name
// before letting the lock go; a sync that was waiting for that lock finds
// its folder gone and makes it again. A running engine is protected by
// the window alone (nothing on the node tells modelsync which revisions
// engines have open), which is why it is days, not minutes.
//
// The S3 server and the cache folder are both treated as untrusted:
//
//   - The listing pass is bounded: at most maxListPages pages of at most
//     maxListPageBytes each, read within listPageTimeout, at most
//     maxObjects keys, keys no longer than S3's own 1,024 bytes, sizes
//     that are not negative and add up to at most maxRevisionBytes and to
//     no more than the disk has free (ErrListing, ErrNoSpace). A page that
//     says more follows but gives no new continuation token is refused, not
//     taken as the end.
//   - A key maps to a path only if it is a clean relative path inside the
//     revision's folder (ErrUnsafeKey), and never to a name modelsync keeps
//     for itself: a segment starting ".llmplat-" (the marker, its
//     temporary file, the lock) or ending ".partial" (copies in progress)
//     is refused loudly (ErrReservedName), so no object can be dropped by,
//     or replace, modelsync's own files.
//   - Every object's copy is bounded by its listed size: a body that
//     announces or sends more is refused after at most that many bytes are
//     on disk, and the partial copy is removed (ErrTooLarge).
//   - Every file operation under the cache folder (-dest) goes through an
//     os.Root, so nothing can lead it outside, and no link inside it is
//     followed: a symbolic link where modelsync expects a folder, a file,
//     a partial copy or the marker is refused (ErrLink), and an opened file
//     is checked to be the one that was looked at. The cache folder itself
//     may be a link; that is the operator's choice.
//
// Folders are made 0755, only when missing, so modelsync needs no more
// rights than to write in the cache folder. In a model pod it runs as the
// image's non-root user, after Own, the pod's only root step (with
// CAP_CHOWN alone), has handed it the cache folder that kubelet made
// root:root 0755; Own changes the owner of that folder and of nothing in
// it.
package modelsync
