package mountinfo

import "testing"

func TestParse(t *testing.T) {
	ms, err := Parse([]byte("36 35 98:0 /mnt1 /mnt\\040two ro,noatime master:1 - ext3 /dev/root rw\n\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 1 || ms[0] != (Mount{Point: "/mnt two", FSType: "ext3", ReadOnly: true}) {
		t.Errorf("got %+v", ms)
	}
	for _, bad := range []string{"36 35 98:0 / /mnt rw", "36 35 98:0 / mnt rw - ext4 x rw", "1 2 3 4 /a\\04 rw - t s o", "1 2 3 4 /a\\999 rw - t s o", "1 2 3 4 /a rw -"} {
		if _, err := Parse([]byte(bad)); err == nil {
			t.Errorf("%q parsed, want an error", bad)
		}
	}
}
