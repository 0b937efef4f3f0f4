package orchestrate

// checkKVMRecords holds every KVM directory to what the first one is held
// to. With --kvm-dir, each usable exercise (perLang) needs a verified
// .abi10.json in every KVM directory: a directory without one is from a
// KVM run that did not verify the exercise (an observation that failed, was
// aborted or crashed writes none), and two directories with no sidecar
// would otherwise "agree". The first directory's records are checked by
// checkLanguage; the others' here, each problem naming its directory.
func checkKVMRecords(o Options, names map[string]bool, perLang map[string][]*exercise, probs *problems) {
	for i, dir := range o.KVMDirs {
		// A directory that cannot be listed is refused already
		// (compareKVMDirs, listDir).
		dirNames := listDir(dir, &problems{})
		for _, l := range o.Langs {
			for _, ex := range perLang[l] {
				if !dirNames[ex.stem+abi10JSON] {
					probs.add("%s has no %s%s in %s; with --kvm-dir, every exercise needs the record of a KVM run that verified it", ex.stem, ex.stem, abi10JSON, dir)
					continue
				}
				if i == 0 {
					continue // checkLanguage checked it
				}
				var sub problems
				checkABI10(l, ex.stem, o.PathDir, dir, names, dirNames, nil, &sub)
				for _, p := range sub {
					probs.add("in %s: %s", dir, p)
				}
			}
		}
	}
}
