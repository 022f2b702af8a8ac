import csv,sys
f=sys.argv[1]; rows=list(csv.reader(open(f)))
h=rows[1]; data=rows[2:]
i_s=h.index("Warp Stall Sampling (All Samples)")
i_e=h.index("Instructions Executed")
tot=sum(int(r[i_s] or 0) for r in data)
cuts=[int(x) for x in sys.argv[2:]]
b=[0]+cuts+[len(data)]
for a,z in zip(b,b[1:]):
    s=sum(int(r[i_s] or 0) for r in data[a:z]); e=sum(int(r[i_e] or 0) for r in data[a:z])
    print(f"{a:5d}-{z:5d} {100*s/tot:5.1f}% samples, {e} warp-instr executed")
