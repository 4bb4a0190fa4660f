/* Pinned key -> node placements for the four-node ring of test_client_ring.c
 * (vnodes 160). Generated once from ring.c; a change here changes where
 * every deployed client looks for every key: do not regenerate lightly. */
		{ 0x0ull, "10.77.0.3:7471" },
		{ 0x1ull, "10.77.0.1:7471" },
		{ 0x2ull, "10.77.0.1:7471" },
		{ 0x3ull, "10.77.0.4:7471" },
		{ 0x2aull, "10.77.0.2:7471" },
		{ 0x1000ull, "10.77.0.4:7471" },
		{ 0x75bcd15ull, "10.77.0.1:7471" },
		{ 0x100000000000007ull, "10.77.0.1:7471" },
		{ 0x190000000001869full, "10.77.0.1:7471" },
		{ 0xffffffffffffffffull, "10.77.0.2:7471" },
