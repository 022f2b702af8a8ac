import csv,sys
f=sys.argv[1]; rows=list(csv.reader(open(f)))
h=rows[1]; data=rows[2:]
i_s=h.index("Warp Stall Sampling (All Samples)")
reasons=[c for c in h if c.startswith("stall_") and "Not Issued" not in c]
tot=sum(int(r[i_s] or 0) for r in data)
print(f, "total samples", tot)
idx=[ (int(r[i_s] or 0), n) for n,r in enumerate(data)]
# print each instruction with samples, in address order, annotate top
for n,r in enumerate(data):
    s=int(r[i_s] or 0)
    if s*1000 >= tot*int(sys.argv[2] if len(sys.argv)>2 else 5):
        rs=sorted(((int(r[h.index(c)] or 0),c[6:]) for c in reasons), reverse=True)[:3]
        print(f"{n:5d} {100*s/tot:5.1f}% {r[1].strip()[:60]:60s} {rs}")
