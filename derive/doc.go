// Package derive holds no code; its subpackages derive a policy's rows
// from what runs showed, for the layer pruner (pruner/prune) and the
// recording pruner (recorder) alike:
//
//   - [github.com/lockstep-sandbox/lockstep/derive/placement] decides where
//     a grant lands (which path a refused access becomes) and tidies a set
//     of grants.
//   - [github.com/lockstep-sandbox/lockstep/derive/limits] measures what an
//     exercise uses and derives the policy's [limits] section with margins.
package derive
