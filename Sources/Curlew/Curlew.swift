// The route/provider layer on top of CurlewEngine (issue 4).
