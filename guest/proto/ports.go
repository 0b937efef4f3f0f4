package proto

import (
	"os"
	"path/filepath"
	"strings"
)

// PortClass is where a guest finds its virtio-serial ports by name: a
// guest has no udev to make /dev/virtio-ports links.
const PortClass = "/sys/class/virtio-ports"

// Ports maps the name of each virtio-serial port the guest has to its
// device file; a port whose name cannot be read is left out.
func Ports() (map[string]string, error) {
	ents, err := os.ReadDir(PortClass)
	if err != nil {
		return nil, err
	}
	ports := make(map[string]string, len(ents))
	for _, e := range ents {
		name, err := os.ReadFile(filepath.Join(PortClass, e.Name(), "name"))
		if err != nil {
			continue
		}
		ports[strings.TrimSpace(string(name))] = "/dev/" + e.Name()
	}
	return ports, nil
}
