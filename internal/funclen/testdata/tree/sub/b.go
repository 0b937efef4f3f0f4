package sub

type S struct{}

func (S) value() {
	_ = 1
	_ = 2
	_ = 3
}
