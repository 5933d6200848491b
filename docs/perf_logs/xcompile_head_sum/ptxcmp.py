"""Compare PTX files pairwise (X.ptx vs X__alt.ptx) up to the debug sections, .file lines aside."""
import sys, glob, re
def body(p):
    out = []
    for l in open(p):
        if l.lstrip().startswith(".section") and ".debug" in l: break
        if l.lstrip().startswith(".file"): continue
        out.append(l)
    return out
same = diff = 0
for a in sorted(glob.glob(sys.argv[1] + "/*.ptx")):
    if a.endswith("__alt.ptx"): continue
    b = a[:-4] + "__alt.ptx"
    ok = body(a) == body(b)
    same += ok; diff += not ok
    print(("SAME " if ok else "DIFF ") + a.rsplit("/", 1)[1])
print(same, "identical,", diff, "differ")
