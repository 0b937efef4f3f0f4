package harness

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/lockstep-sandbox/lockstep/guest/proto"
)

// SetRole makes the guest's job the guest's own lockstep binary playing
// role (a registered proto.EnvRole value: a workload's guest side) with
// options as its typed options (JSON, proto.OptionsFile), in place of a
// command line: a workload's host side hands its guest side values, never
// lockstep's flags.
func (o *Options) SetRole(role string, options any) error {
	b, err := json.Marshal(options)
	if err != nil {
		return fmt.Errorf("the options of the guest's %s job: %w", role, err)
	}
	o.Command = []string{proto.GuestBinary}
	o.Env = append(slices.Clip(o.Env), proto.EnvRole+"="+role)
	o.JobOptions = b
	return nil
}
