print("curlew: demo coming")
