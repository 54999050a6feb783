-- policy-extender's language server in Neovim 0.7 or later (docs/editors.md).
-- Source this file from init.lua (`dofile("/path/to/policy-extender.lua")`) or copy it there:
-- *.policy files get the `policy` filetype, and the server (`policy-extender lsp`, over stdio)
-- is started once per policy directory and attached to each policy buffer in it.
-- Set vim.g.policy_extender_cmd first to run another command (a venv's path, a container).
-- (an autocmd rather than vim.filetype.add, which 0.7 only honours with g:do_filetype_lua; and
-- `set filetype`, not `setfiletype`: Vim's own detection calls a file with '#' comments "conf")
vim.api.nvim_create_autocmd({ "BufRead", "BufNewFile" }, { pattern = "*.policy", command = "set filetype=policy" })

local clients = {}

local function attach(args)
  local name = vim.api.nvim_buf_get_name(args.buf)
  local root = vim.fn.fnamemodify(name, ":p:h")
  local id = clients[root]
  if id == nil or vim.lsp.get_client_by_id(id) == nil then
    id = vim.lsp.start_client({
      name = "policy-extender",
      cmd = vim.g.policy_extender_cmd or { "policy-extender", "lsp" },
      root_dir = root,
    })
    clients[root] = id
  end
  if id ~= nil then
    vim.lsp.buf_attach_client(args.buf, id)
  end
end

vim.api.nvim_create_autocmd("FileType", { pattern = "policy", callback = attach })
