-- Driven by tests/lsp/test_neovim.py: Neovim headless, the shipped config
-- (editors/neovim/policy-extender.lua), one policy file opened; what the editor then holds
-- (filetype, diagnostics, a completion and a hover) written as JSON to $RESULT.
vim.g.policy_extender_cmd = vim.fn.json_decode(vim.env.SERVER_CMD)
dofile(vim.env.CONFIG)
vim.cmd("filetype on")
vim.cmd("edit " .. vim.fn.fnameescape(vim.env.POLICY_FILE))
local buf = vim.api.nvim_get_current_buf()
local out = { filetype = vim.bo[buf].filetype, diagnostics = {}, completion = {}, hover = "" }
vim.wait(60000, function() return #vim.diagnostic.get(buf) > 0 end, 50)
for _, d in ipairs(vim.diagnostic.get(buf)) do
  local code = d.code or (d.user_data and d.user_data.lsp and d.user_data.lsp.code)
  table.insert(out.diagnostics, { lnum = d.lnum, col = d.col, end_col = d.end_col, code = code,
                                  message = d.message, severity = d.severity })
end
local uri = vim.uri_from_bufnr(buf)
local line, character = tonumber(vim.env.COMPLETE_LINE), tonumber(vim.env.COMPLETE_CHARACTER)
local answers = vim.lsp.buf_request_sync(buf, "textDocument/completion",
  { textDocument = { uri = uri }, position = { line = line, character = character } }, 30000) or {}
for _, answer in pairs(answers) do
  local items = answer.result and (answer.result.items or answer.result) or {}
  for _, item in ipairs(items) do table.insert(out.completion, item.label) end
end
answers = vim.lsp.buf_request_sync(buf, "textDocument/hover",
  { textDocument = { uri = uri }, position = { line = tonumber(vim.env.HOVER_LINE),
                                                character = tonumber(vim.env.HOVER_CHARACTER) } }, 30000) or {}
for _, answer in pairs(answers) do
  if answer.result then out.hover = answer.result.contents.value end
end
vim.fn.writefile({ vim.fn.json_encode(out) }, vim.env.RESULT)
vim.cmd("qa!")
