# proxy-phases.awk: where the time of a QD 1 read goes, from a packet capture.
#
#   tcpdump -r CAPTURE -nn -tt |
#       awk -v be=ADDR.PORT [-v gw=ADDR.PORT] -f tests/bench/proxy-phases.awk
#
# CAPTURE holds one client reading at queue depth 1, taken in the client's network namespace
# with `tcpdump -i any` on the back end's port and (proxied) the gateway's port; be and gw name
# the back end's and the gateway's listening address as tcpdump prints it (10.214.1.2.3260). With
# gw set, a cycle runs from one command PDU of the host to the gateway (48 bytes, no data) to
# the next, and is cut into: cmd_forward (host's command in -> the gateway's command to the back
# end out), backend_first_byte (-> the first Data-In byte back), backend_transfer (first to last
# byte from the back end), store_forward_gap (last byte from the back end -> first byte to the
# host), host_transfer (first to last byte to the host), client (-> the host's next command).
# With gw empty (the client reading the back end directly) only backend_first_byte,
# backend_transfer and client apply. Printed: the medians in µs over the complete cycles.
function med(a, n,    i, j, t) {
	for (i = 2; i <= n; i++) {
		t = a[i]
		for (j = i - 1; j >= 1 && a[j] > t; j--)
			a[j + 1] = a[j]
		a[j + 1] = t
	}
	return n ? (n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2) : 0
}
function close_cycle(t) {
	if (!open || !bg0 || (gw != "" && !gh0))
		return
	n++
	fb[n] = bg0 - gb; bex[n] = bg1 - bg0
	if (gw != "") {
		fwd[n] = gb - hg; sf[n] = gh0 - bg1; hx[n] = gh1 - gh0; cl[n] = t - gh1
		tot[n] = t - hg
	} else {
		cl[n] = t - bg1; tot[n] = t - gb
	}
}
{
	len = 0
	for (i = 1; i <= NF; i++) {
		if ($i == "length")
			len = $(i + 1) + 0
		if ($i == ">") {
			src = $(i - 1)
			dst = $(i + 1)
		}
	}
	if (len == 0)
		next
	if (gw != "" && dst == gw ":")
		d = "HG"
	else if (gw != "" && src == gw)
		d = "GH"
	else if (dst == be ":")
		d = "GB"
	else if (src == be)
		d = "BG"
	else
		next
	t = $1 * 1e6
	if (len <= 48 && (d == "HG" || (gw == "" && d == "GB"))) {
		close_cycle(t)
		open = 1; hg = t; gb = t; bg0 = 0; gh0 = 0
	} else if (d == "GB" && len <= 48) {
		gb = t
	} else if (d == "BG") {
		if (!bg0)
			bg0 = t
		bg1 = t
	} else if (d == "GH") {
		if (!gh0)
			gh0 = t
		gh1 = t
	}
}
END {
	if (gw != "")
		printf "cycles=%d cmd_forward=%.0f backend_first_byte=%.0f backend_transfer=%.0f " \
			"store_forward_gap=%.0f host_transfer=%.0f client=%.0f cycle=%.0f\n", n, med(fwd, n),
			med(fb, n), med(bex, n), med(sf, n), med(hx, n), med(cl, n), med(tot, n)
	else
		printf "cycles=%d backend_first_byte=%.0f backend_transfer=%.0f client=%.0f cycle=%.0f\n",
			n, med(fb, n), med(bex, n), med(cl, n), med(tot, n)
}
