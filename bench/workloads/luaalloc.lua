-- sunmao benchmark workload (bench/README.md, "lua"): an allocation-heavy Lua 5.4 script.
-- Tables (arrays, hashes, trees), strings (concatenation, formatting, gsub, table.concat) and
-- closures are made and dropped in rounds, so the collector frees most of them while new ones are
-- made. All randomness comes from a fixed LCG, so the output (a checksum per phase and a total) is
-- the same under every allocator; the harness compares it with the run without LD_PRELOAD.
-- usage: lua5.4 luaalloc.lua [scale=4]
local scale = tonumber(arg and arg[1]) or 4
local seed = 12345
local function rnd(n)                  -- deterministic LCG, 1..n
  seed = (seed * 1103515245 + 12345) % 2147483648
  return seed % n + 1
end
local MOD = 4294967291
local function mix(h, v) return (h * 31 + v) % MOD end
local function strsum(h, s)
  for i = 1, #s, 7 do h = mix(h, s:byte(i)) end
  return mix(h, #s)
end

-- 1. binary trees of tables (bottom-up, checked by walking them)
local function make(d)
  if d == 0 then return {} end
  d = d - 1
  return {make(d), make(d)}
end
local function check(t)
  if not t[1] then return 1 end
  return 1 + check(t[1]) + check(t[2])
end
local function trees()
  local h, long = 0, make(14)
  for r = 1, 6 * scale do
    for d = 4, 14, 2 do
      local n = 2 ^ (16 - d) // 1
      for _ = 1, n // 8 do h = mix(h, check(make(d))) end
    end
  end
  return mix(h, check(long))
end

-- 2. strings: building, formatting, splitting, substitution, tables of strings as dictionaries
local words = {}
for i = 1, 500 do
  local w = {}
  for j = 1, 3 + rnd(9) do w[j] = string.char(96 + rnd(26)) end
  words[i] = table.concat(w)
end
local function strings()
  local h = 0
  for r = 1, 12 * scale do
    local dict, parts = {}, {}
    for i = 1, 3000 do
      local k = words[rnd(500)] .. "-" .. rnd(400)
      local v = dict[k]
      dict[k] = (v or "") .. words[rnd(500)]:upper() .. string.format("%05d;", i)
      if #dict[k] > 300 then dict[k] = dict[k]:sub(-60) end
      if i % 3 == 0 then parts[#parts + 1] = string.rep(words[rnd(500)], 1 + rnd(20)) end
    end
    local keys = {}
    for k in pairs(dict) do keys[#keys + 1] = k end
    table.sort(keys)
    for _, k in ipairs(keys) do h = strsum(h, k .. "=" .. dict[k]) end
    local doc = table.concat(parts, " ")
    local n = 0
    for w in doc:gmatch("%a+") do n = n + 1; if n % 97 == 0 then h = strsum(h, w) end end
    h = strsum(h, (doc:sub(1, 20000):gsub("[aeiou]+", function(m) return "<" .. #m .. ">" end)))
    h = mix(h, n)
  end
  return h
end

-- 3. closures and objects: counters, memoised functions, lists of records, a priority queue
local function closures()
  local h = 0
  for r = 1, 8 * scale do
    local fs = {}
    for i = 1, 4000 do
      local acc, step = i, rnd(7)
      fs[i] = function(x) acc = acc + step * x; return acc end
    end
    for i = 1, 20000 do h = mix(h, fs[rnd(4000)](i % 13)) end
    local recs = {}
    for i = 1, 6000 do recs[i] = {id = i, key = rnd(100000), tag = words[rnd(500)], pts = {rnd(50), rnd(50), rnd(50)}} end
    table.sort(recs, function(a, b) if a.key ~= b.key then return a.key < b.key end return a.id < b.id end)
    for i = 1, #recs, 11 do local q = recs[i]; h = mix(mix(h, q.id), q.pts[1] + q.pts[2] * q.pts[3]) end
    local heap = {}
    local function push(v)
      heap[#heap + 1] = v
      local i = #heap
      while i > 1 and heap[i // 2][1] > heap[i][1] do heap[i], heap[i // 2] = heap[i // 2], heap[i]; i = i // 2 end
    end
    local function pop()
      local top, last = heap[1], table.remove(heap)
      if #heap > 0 then
        heap[1] = last
        local i = 1
        while true do
          local l, s = 2 * i, i
          if l <= #heap and heap[l][1] < heap[s][1] then s = l end
          if l + 1 <= #heap and heap[l + 1][1] < heap[s][1] then s = l + 1 end
          if s == i then break end
          heap[i], heap[s] = heap[s], heap[i]; i = s
        end
      end
      return top
    end
    for i = 1, 8000 do
      push({rnd(1000000), "job" .. i})
      if i % 3 == 0 then h = strsum(h, pop()[2]) end
    end
    while #heap > 0 do h = mix(h, pop()[1]) end
  end
  return h
end

-- 4. a growing and shrinking hash of arrays (table resizing, array parts, removal)
local function churn()
  local h, live = 0, {}
  for r = 1, 150000 * scale do
    local k = rnd(20000)
    local t = live[k]
    if t and rnd(4) == 1 then
      h = mix(h, #t); live[k] = nil
    elseif t then
      for _ = 1, rnd(24) do t[#t + 1] = r end
      if #t > 400 then h = mix(h, t[#t] % 1000); live[k] = {t[1]} end
    else
      live[k] = {r, tostring(r)}
    end
  end
  local n = 0
  for _, t in pairs(live) do n = n + #t end
  return mix(h, n)
end

local total = 0
for _, p in ipairs({{"trees", trees}, {"strings", strings}, {"closures", closures}, {"churn", churn}}) do
  local v = p[2]()
  print(string.format("%-9s %d", p[1], v))
  total = mix(total, v)
end
print(string.format("checksum  %d", total))
