// Package featuretest decides, for a test that needs a kernel feature,
// whether the feature's absence is a skip or a failure: below the feature's
// first Landlock ABI or kernel release the test is skipped, and at or above
// it a missing feature fails the test, so a kernel that should offer the
// feature and does not is never hidden behind a skip. Only tests import it.
package featuretest
