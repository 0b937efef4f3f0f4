package tree

func testOnly() {
	_ = 1
}
